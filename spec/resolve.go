package spec

import (
	"io"
	"os"
	"strconv"
	"strings"
)

// Parse parses and validates a spec. file is used in error positions and recorded
// in the model. The error, if any, is an ErrorList with every problem found.
func Parse(file string, src []byte) (*Protocol, error) { return ParseWith(file, src, Options{}) }

// ParseWith is Parse with options.
func ParseWith(file string, src []byte, opt Options) (*Protocol, error) {
	ast, err := parse(file, string(src))
	if err != nil {
		return nil, ErrorList{err.(*Error)}
	}
	r := &resolver{file: file, p: &Protocol{Path: file}}
	r.resolve(ast)
	protocolPos := Pos{File: file, Line: 1, Col: 1}
	if ast.protocol != nil {
		protocolPos = ast.protocol.pos
	}
	r.goNames(protocolPos, opt)
	if len(r.errs) > 0 {
		return nil, r.errs.sorted()
	}
	return r.p, nil
}

// ParseFile reads and parses a spec file.
func ParseFile(path string) (*Protocol, error) {
	src, err := ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(path, src)
}

// ReadFile reads a spec file, refusing one larger than MaxSpecSize before
// reading past the limit (a device that never ends is refused too).
func ReadFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	src, err := io.ReadAll(io.LimitReader(f, MaxSpecSize+1))
	if err != nil {
		return nil, err
	}
	if len(src) > MaxSpecSize {
		return nil, ErrorList{errorf(Pos{File: path, Line: 1, Col: 1}, "spec is larger than the %d-byte limit", MaxSpecSize)}
	}
	return src, nil
}

type resolver struct {
	file    string
	p       *Protocol
	errs    ErrorList
	names   map[string]Pos // every top-level type name
	named   map[string]*Named
	enums   map[string]*Enum
	structs map[string]*Struct
	astStr  map[string]*astStruct
	msgs    map[string]*Message
	layouts map[string]*astLayout
}

func (r *resolver) errorf(p Pos, format string, args ...any) {
	r.errs = append(r.errs, errorf(p, format, args...))
}

var reserved = map[string]bool{
	"protocol": true, "version": true, "type": true, "enum": true, "struct": true, "message": true,
	"machine": true, "invariant": true, "state": true, "event": true, "on": true, "ignore": true, "layout": true,
	"in": true, "start": true, "final": true, "hot": true,
}

func (r *resolver) checkName(n astName, what string) bool {
	if reserved[n.name] {
		r.errorf(n.pos, "%s name %q is a reserved word", what, n.name)
		return false
	}
	_, scalar := scalarKinds[n.name]
	if _, fixed := layoutKinds[n.name]; scalar || fixed || n.name == NodeType {
		r.errorf(n.pos, "%s name %q is a built-in type", what, n.name)
		return false
	}
	return true
}

// declareType records a top-level type name, reporting duplicates.
func (r *resolver) declareType(n astName, what string) bool {
	if !r.checkName(n, what) {
		return false
	}
	if first, dup := r.names[n.name]; dup {
		r.errorf(n.pos, "duplicate type name %q (first declared at %s)", n.name, first)
		return false
	}
	r.names[n.name] = n.pos
	return true
}

func (r *resolver) number(n astNumber, what string, max uint64) (uint64, bool) {
	raw := n.raw
	if strings.HasPrefix(raw, "-") {
		r.errorf(n.pos, "bad %s %q: must not be negative", what, raw)
		return 0, false
	}
	// Decimal, or hex after 0x: not Go's octal (010 would be 8), binary
	// or underscores, which the language does not have.
	base, digits := 10, raw
	if h, ok := strings.CutPrefix(strings.ToLower(raw), "0x"); ok {
		base, digits = 16, h
	}
	v, err := strconv.ParseUint(digits, base, 64)
	if err == nil && base == 10 && len(raw) > 1 && raw[0] == '0' {
		err = strconv.ErrSyntax // a leading zero reads as octal elsewhere: refuse it
	}
	if err != nil {
		if ne, ok := err.(*strconv.NumError); ok && ne.Err == strconv.ErrRange {
			r.errorf(n.pos, "bad %s %q: out of range", what, raw)
		} else {
			r.errorf(n.pos, "bad %s %q: not a number (decimal without leading zeros, or 0x hex)", what, raw)
		}
		return 0, false
	}
	if v > max {
		r.errorf(n.pos, "bad %s %d: must be at most %d", what, v, max)
		return 0, false
	}
	return v, true
}

func (r *resolver) resolve(f *astFile) {
	p := r.p
	start := Pos{File: r.file, Line: 1, Col: 1}
	if f.protocol == nil {
		r.errorf(start, "missing \"protocol NAME;\" declaration")
	} else {
		p.Name = f.protocol.name
		p.Doc = f.doc
		if strings.ToLower(p.Name) != p.Name {
			r.errorf(f.protocol.pos, "protocol name %q must be lower case (it names a Go package)", p.Name)
		}
	}
	if f.version == nil {
		r.errorf(start, "missing \"version N;\" declaration")
	} else if v, ok := r.number(*f.version, "version", 255); ok {
		if v == 0 {
			r.errorf(f.version.pos, "bad version 0: must be 1 to 255")
		}
		p.Version = int(v)
	}

	r.names = map[string]Pos{}
	r.named = map[string]*Named{}
	r.enums = map[string]*Enum{}
	r.structs = map[string]*Struct{}
	r.astStr = map[string]*astStruct{}
	r.layouts = map[string]*astLayout{}

	// Declare every type name first so declarations may come in any order.
	for _, d := range f.types {
		if r.declareType(d.name, "type") {
			r.named[d.name.name] = &Named{Doc: d.doc, Name: d.name.name, Pos: d.name.pos}
		}
	}
	for _, d := range f.enums {
		if r.declareType(d.name, "enum") {
			r.enums[d.name.name] = &Enum{Doc: d.doc, Name: d.name.name, Pos: d.name.pos}
		}
	}
	for _, d := range f.structs {
		if r.declareType(d.name, "struct") {
			r.structs[d.name.name] = &Struct{Doc: d.doc, Name: d.name.name, Pos: d.name.pos}
			r.astStr[d.name.name] = d
		}
	}
	for _, d := range f.layouts {
		if r.declareType(d.name, "layout") {
			r.layouts[d.name.name] = d
		}
	}
	msgNames := map[string]Pos{}
	for _, d := range f.messages {
		if !r.checkName(d.name, "message") {
			continue
		}
		if first, dup := r.names[d.name.name]; dup {
			r.errorf(d.name.pos, "duplicate name %q (first declared at %s)", d.name.name, first)
			continue
		}
		if first, dup := msgNames[d.name.name]; dup {
			r.errorf(d.name.pos, "duplicate message name %q (first declared at %s)", d.name.name, first)
			continue
		}
		msgNames[d.name.name] = d.name.pos
	}

	for _, d := range f.types {
		n := r.named[d.name.name]
		if n == nil {
			continue
		}
		if d.typ.list {
			r.errorf(d.typ.pos, "named type %q must be a scalar, not a list", d.name.name)
			continue
		}
		if d.typ.name == NodeType {
			r.errorf(d.typ.pos, "named type %q cannot be a node: a node's name is protocol.NodeID in Go, the type the explorer's world renames; write node itself", d.name.name)
			continue
		}
		k, ok := scalarKinds[d.typ.name]
		if !ok {
			r.errorf(d.typ.pos, "named type %q must be a scalar (u8, u16, u32, u64, i64, fixed64, bool, string, bytes), not %q", d.name.name, d.typ.name)
			continue
		}
		n.Type = &Type{Kind: k, Named: n}
		p.Named = append(p.Named, n)
	}

	for _, d := range f.enums {
		e := r.enums[d.name.name]
		if e == nil {
			continue
		}
		k, ok := scalarKinds[d.base.name]
		if d.base.list || !ok || !k.IsUnsigned() {
			r.errorf(d.base.pos, "enum %q must be based on an unsigned integer type sent as a uvarint (u8, u16, u32, u64; not fixed64)", d.name.name)
			continue
		}
		e.Base = k
		seenName := map[string]Pos{}
		seenVal := map[uint64]string{}
		for _, v := range d.values {
			if first, dup := seenName[v.name.name]; dup {
				r.errorf(v.name.pos, "duplicate enum value name %q (first declared at %s)", v.name.name, first)
				continue
			}
			seenName[v.name.name] = v.name.pos
			val, ok := r.number(v.value, "enum value", k.MaxValue())
			if !ok {
				continue
			}
			if other, dup := seenVal[val]; dup {
				r.errorf(v.value.pos, "duplicate enum value %d (also %q)", val, other)
				continue
			}
			seenVal[val] = v.name.name
			e.Values = append(e.Values, &EnumValue{Doc: v.doc, Name: v.name.name, Value: val, Pos: v.name.pos})
		}
		if len(d.values) == 0 {
			r.errorf(d.name.pos, "enum %q has no values", d.name.name)
		}
		p.Enums = append(p.Enums, e)
	}

	for _, d := range f.structs {
		s := r.structs[d.name.name]
		if s == nil {
			continue
		}
		s.Fields = r.fields(d.fields)
	}
	r.orderStructs(f)

	codes := map[uint64]string{}
	r.msgs = map[string]*Message{}
	for _, d := range f.messages {
		if first, ok := msgNames[d.name.name]; !ok || first != d.name.pos {
			continue
		}
		code, ok := r.number(d.code, "message code", 1<<14-1)
		if ok && code == 0 {
			r.errorf(d.code.pos, "bad message code 0: codes start at 1")
			ok = false
		}
		if ok {
			if other, dup := codes[code]; dup {
				r.errorf(d.code.pos, "duplicate message code %d (also message %q)", code, other)
			}
			codes[code] = d.name.name
		}
		msg := &Message{Doc: d.doc, Name: d.name.name, Code: code, Fields: r.fields(d.fields), Pos: d.name.pos}
		r.msgs[msg.Name] = msg
		p.Messages = append(p.Messages, msg)
	}

	for _, d := range f.layouts {
		if r.layouts[d.name.name] == d {
			p.Layouts = append(p.Layouts, r.layout(d))
		}
	}

	machineNames := map[string]Pos{}
	for _, d := range f.machines {
		if !r.checkName(d.name, "machine") {
			continue
		}
		if first, dup := machineNames[d.name.name]; dup {
			r.errorf(d.name.pos, "duplicate machine name %q (first declared at %s)", d.name.name, first)
			continue
		}
		machineNames[d.name.name] = d.name.pos
		if m := r.machine(d, msgNames); m != nil {
			p.Machines = append(p.Machines, m)
		}
	}

	invNames := map[string]Pos{}
	for _, d := range f.invariants {
		if first, dup := invNames[d.name.name]; dup {
			r.errorf(d.name.pos, "duplicate invariant name %q (first declared at %s)", d.name.name, first)
			continue
		}
		invNames[d.name.name] = d.name.pos
		if strings.TrimSpace(d.text) == "" {
			r.errorf(d.name.pos, "invariant %q has an empty description", d.name.name)
		}
		for _, line := range strings.Split(d.text, "\n") {
			if plusBuild(line) {
				r.errorf(d.name.pos, "invariant %q: a line starting with +build would become a Go build constraint in the generated code", d.name.name)
				break
			}
		}
		p.Invariants = append(p.Invariants, &Invariant{Doc: d.doc, Name: d.name.name, Text: d.text, Pos: d.name.pos})
	}
}

func (r *resolver) fields(ast []*astField) []*Field {
	seen := map[string]Pos{}
	var out []*Field
	for _, fd := range ast {
		if first, dup := seen[fd.name.name]; dup {
			r.errorf(fd.name.pos, "duplicate field name %q (first declared at %s)", fd.name.name, first)
			continue
		}
		seen[fd.name.name] = fd.name.pos
		t := r.typeRef(fd.typ)
		if t == nil {
			continue
		}
		out = append(out, &Field{Doc: fd.doc, Name: fd.name.name, Type: t, Pos: fd.name.pos})
	}
	return out
}

func (r *resolver) typeRef(t *astTypeRef) *Type {
	if t.array != "" {
		r.errorf(t.pos, "[%s] arrays are for layouts only (a message or struct holds bytes, or a list)", t.array)
		return nil
	}
	if varint, ok := layoutOnly[t.name]; ok {
		r.errorf(t.pos, "%s is a layout's field type: in a message or struct, %s travels as a uvarint", t.name, varint)
		return nil
	}
	if _, ok := r.layouts[t.name]; ok {
		r.errorf(t.pos, "layout %q is a frame of its own: it cannot be a field's type", t.name)
		return nil
	}
	if t.list {
		elem := r.typeRef(t.elem)
		if elem == nil {
			return nil
		}
		return &Type{Kind: KindList, Elem: elem}
	}
	if k, ok := scalarKinds[t.name]; ok {
		return &Type{Kind: k}
	}
	if t.name == NodeType {
		return &Type{Kind: KindString, Node: true}
	}
	if n, ok := r.named[t.name]; ok {
		if n.Type == nil {
			return nil // its own error is already reported
		}
		return &Type{Kind: n.Type.Kind, Named: n}
	}
	if e, ok := r.enums[t.name]; ok {
		return &Type{Kind: KindEnum, Enum: e}
	}
	if s, ok := r.structs[t.name]; ok {
		return &Type{Kind: KindStruct, Struct: s}
	}
	r.errorf(t.pos, "unknown type %q", t.name)
	return nil
}

// orderStructs lists structs so each follows those it embeds, and reports a
// struct that contains itself (directly or not) outside a list: it would be infinite.
func (r *resolver) orderStructs(f *astFile) {
	const (
		white = iota
		grey
		black
	)
	color := map[*Struct]int{}
	var visit func(s *Struct, path []string) bool
	visit = func(s *Struct, path []string) bool {
		switch color[s] {
		case grey:
			r.errorf(s.Pos, "struct %q contains itself (%s -> %s); use a list to break the cycle", s.Name, strings.Join(path, " -> "), s.Name)
			return false
		case black:
			return true
		}
		color[s] = grey
		for _, fd := range s.Fields {
			if t := fd.Type; t.Kind == KindStruct {
				// Only a struct held directly makes a value infinite; one
				// held in a list is recursion (a tree), which the decoder
				// bounds by Limits.MaxDepth.
				if !visit(t.Struct, append(path, s.Name)) {
					color[s] = black
					return false
				}
			}
		}
		color[s] = black
		r.p.Structs = append(r.p.Structs, s)
		return true
	}
	for _, d := range f.structs {
		if s := r.structs[d.name.name]; s != nil {
			visit(s, nil)
		}
	}
	r.markRecursive()
}

// markRecursive sets Recursive on every struct that reaches itself through
// its fields' types, lists included: the structs of a strongly connected
// component of more than one, or with an edge to itself. Tarjan's algorithm
// finds them in one pass, linear in structs and fields; a search from each
// struct was quadratic, 22 s for a chain of 20,000.
func (r *resolver) markRecursive() {
	type node struct {
		index, low int
		onStack    bool
	}
	nodes := make(map[*Struct]*node, len(r.p.Structs))
	var stack []*Struct
	next := 0
	var connect func(s *Struct) *node
	connect = func(s *Struct) *node {
		n := &node{index: next, low: next, onStack: true}
		next++
		nodes[s] = n
		stack = append(stack, s)
		for _, fd := range s.Fields {
			t := fd.Type
			for t.Kind == KindList {
				t = t.Elem
			}
			if t.Kind != KindStruct {
				continue
			}
			if t.Struct == s {
				s.Recursive = true
			}
			switch m := nodes[t.Struct]; {
			case m == nil:
				n.low = min(n.low, connect(t.Struct).low)
			case m.onStack:
				n.low = min(n.low, m.index)
			}
		}
		if n.low == n.index {
			top := len(stack) - 1
			for stack[top] != s {
				top--
			}
			component := stack[top:]
			for _, c := range component {
				nodes[c].onStack = false
				if len(component) > 1 {
					c.Recursive = true
				}
			}
			stack = stack[:top]
		}
		return n
	}
	for _, s := range r.p.Structs {
		if nodes[s] == nil {
			connect(s)
		}
	}
}

func (r *resolver) machine(d *astMachine, msgNames map[string]Pos) *Machine {
	m := &Machine{Doc: d.doc, Name: d.name.name, Pos: d.name.pos}
	errsBefore := len(r.errs)
	states := map[string]*State{}
	statePos := map[string]Pos{}
	for _, s := range d.states {
		if first, dup := statePos[s.name.name]; dup {
			r.errorf(s.name.pos, "duplicate state %q in machine %s (first declared at %s)", s.name.name, m.Name, first)
			continue
		}
		st := &State{Doc: s.doc, Name: s.name.name, Index: len(m.States), Start: s.start, Final: s.final, Hot: s.hot, Pos: s.name.pos}
		if st.Final && st.Hot {
			r.errorf(s.name.pos, "state %q of machine %s is both final and hot: a run may end in a final state, never in a hot one", st.Name, m.Name)
		}
		if st.Start {
			if m.Start != nil {
				r.errorf(s.name.pos, "machine %s has two start states (%q and %q)", m.Name, m.Start.Name, st.Name)
			} else {
				m.Start = st
			}
		}
		states[st.Name] = st
		statePos[st.Name] = s.name.pos
		m.States = append(m.States, st)
	}
	if len(m.States) == 0 {
		r.errorf(d.name.pos, "machine %s declares no states", m.Name)
		return nil
	}
	if len(m.States) > MaxStates || len(d.events) > MaxEvents {
		r.errorf(d.name.pos, "machine %s has %d states and %d events: at most %d states and %d events", m.Name, len(m.States), len(d.events), MaxStates, MaxEvents)
		return nil
	}
	if m.Start == nil {
		r.errorf(d.name.pos, "machine %s has no start state (mark one \"start state NAME;\")", m.Name)
	}
	hasFinal := false
	for _, s := range m.States {
		hasFinal = hasFinal || s.Final
	}
	if !hasFinal {
		r.errorf(d.name.pos, "machine %s has no final state (mark one \"final state NAME;\")", m.Name)
	}

	events := map[string]*Event{}
	eventPos := map[string]Pos{}
	for _, e := range d.events {
		if first, dup := eventPos[e.name.name]; dup {
			r.errorf(e.name.pos, "duplicate event %q in machine %s (first declared at %s)", e.name.name, m.Name, first)
			continue
		}
		ev := &Event{Doc: e.doc, Name: e.name.name, Index: len(m.Events), Pos: e.name.pos}
		if e.payload != nil {
			if msg := r.msgs[e.payload.name]; msg != nil && !e.payload.list {
				ev.Message = msg
			} else if _, declared := msgNames[e.payload.name]; !declared || e.payload.list {
				ev.Payload = r.typeRef(e.payload)
			}
		}
		r.eventSource(m, ev, e)
		events[ev.Name] = ev
		eventPos[ev.Name] = e.name.pos
		m.Events = append(m.Events, ev)
	}

	cells := map[[2]int]Pos{}
	lookupState := func(n astName) *State {
		s := states[n.name]
		if s == nil {
			r.errorf(n.pos, "unknown state %q in machine %s", n.name, m.Name)
		}
		return s
	}
	lookupEvent := func(n astName) *Event {
		e := events[n.name]
		if e == nil {
			r.errorf(n.pos, "unknown event %q in machine %s", n.name, m.Name)
		}
		return e
	}
	claim := func(s *State, e *Event, p Pos) bool {
		key := [2]int{s.Index, e.Index}
		if first, dup := cells[key]; dup {
			r.errorf(p, "machine %s: two transitions for state %q and event %q (first at %s)", m.Name, s.Name, e.Name, first)
			return false
		}
		cells[key] = p
		return true
	}
	for _, o := range d.ons {
		ev := lookupEvent(o.event)
		to := lookupState(o.to)
		for _, fn := range o.from {
			from := lookupState(fn)
			if from == nil || ev == nil || to == nil {
				continue
			}
			if from.Final {
				r.errorf(fn.pos, "machine %s: transition out of final state %q on %q", m.Name, from.Name, ev.Name)
				continue
			}
			if claim(from, ev, fn.pos) {
				m.Transitions = append(m.Transitions, &Transition{Doc: o.doc, From: from, Event: ev, To: to})
			}
		}
	}
	for _, ig := range d.ignores {
		ev := lookupEvent(ig.event)
		for _, sn := range ig.in {
			s := lookupState(sn)
			if s == nil || ev == nil {
				continue
			}
			if claim(s, ev, sn.pos) {
				m.Transitions = append(m.Transitions, &Transition{Doc: ig.doc, From: s, Event: ev})
			}
		}
	}
	if m.Start == nil || len(r.errs) > errsBefore {
		// Reachability over a table with holes would only report consequences.
		return m
	}

	// Every state must be reachable from the start and able to reach a final
	// state: one search forward from the start and one backward from the
	// finals, linear in the transitions.
	next := make([][]*State, len(m.States))
	prev := make([][]*State, len(m.States))
	for _, t := range m.Transitions {
		if t.To != nil {
			next[t.From.Index] = append(next[t.From.Index], t.To)
			prev[t.To.Index] = append(prev[t.To.Index], t.From)
		}
	}
	search := func(from []*State, edges [][]*State) []bool {
		seen := make([]bool, len(m.States))
		queue := from
		for _, s := range from {
			seen[s.Index] = true
		}
		for len(queue) > 0 {
			s := queue[0]
			queue = queue[1:]
			for _, n := range edges[s.Index] {
				if !seen[n.Index] {
					seen[n.Index] = true
					queue = append(queue, n)
				}
			}
		}
		return seen
	}
	var finals []*State
	for _, s := range m.States {
		if s.Final {
			finals = append(finals, s)
		}
	}
	reachable := search([]*State{m.Start}, next)
	finishing := search(finals, prev)
	reach := func(s *State) bool { return reachable[s.Index] }
	done := func(s *State) bool { return finishing[s.Index] }
	for _, s := range m.States {
		if !reach(s) {
			r.errorf(statePos[s.Name], "machine %s: state %q is unreachable from start state %q", m.Name, s.Name, m.Start.Name)
		} else if !done(s) && hasFinal {
			r.errorf(statePos[s.Name], "machine %s: state %q has no path to a final state", m.Name, s.Name)
		}
	}
	return m
}

// layout resolves a layout: each field's fixed size and offset.
func (r *resolver) layout(d *astLayout) *Layout {
	l := &Layout{Doc: d.doc, Name: d.name.name, Pos: d.name.pos}
	seen := map[string]Pos{}
	for _, fd := range d.fields {
		if first, dup := seen[fd.name.name]; dup {
			r.errorf(fd.name.pos, "duplicate field name %q (first declared at %s)", fd.name.name, first)
			continue
		}
		seen[fd.name.name] = fd.name.pos
		f := &LayoutField{Doc: fd.doc, Name: fd.name.name, Offset: l.Size, Pos: fd.name.pos}
		t := fd.typ
		switch {
		case t.list:
			r.errorf(t.pos, "layout %q: field %q is a list; a layout's fields have fixed sizes (u8, bool, fixed16, fixed32, fixed64, [N]u8)", l.Name, f.Name)
			continue
		case t.array != "":
			n, ok := r.number(astNumber{raw: t.array, pos: t.pos}, "array length", MaxLayoutArray)
			if !ok {
				continue
			}
			if n == 0 {
				r.errorf(t.pos, "bad array length 0: a field takes at least one byte")
				continue
			}
			k, ok := layoutKinds[t.elem.name]
			if t.elem.list || t.elem.array != "" || !ok || k.kind == LayoutBool {
				r.errorf(t.elem.pos, "layout %q: field %q: arrays hold u8 (bytes as they are), fixed16, fixed32 or fixed64, not %s", l.Name, f.Name, spellRef(t.elem))
				continue
			}
			f.Kind, f.Count, f.Size = k.kind, int(n), int(n)*k.size
			if k.kind == LayoutU8 {
				f.Kind = LayoutBytes
			}
		default:
			k, ok := layoutKinds[t.name]
			if !ok {
				why := "a layout holds fixed-size fields only (u8, bool, fixed16, fixed32, fixed64, [N]u8)"
				if kind, scalar := scalarKinds[t.name]; scalar && kind.IsUnsigned() {
					why = t.name + " travels as a uvarint, of no fixed size: use fixed" + strings.TrimPrefix(t.name, "u")
				}
				r.errorf(t.pos, "layout %q: field %q: %s, not %s", l.Name, f.Name, why, spellRef(t))
				continue
			}
			f.Kind, f.Size = k.kind, k.size
		}
		if l.Size+f.Size > MaxLayoutSize {
			r.errorf(fd.name.pos, "layout %q is larger than %d bytes", l.Name, MaxLayoutSize)
			return l
		}
		l.Size += f.Size
		l.Fields = append(l.Fields, f)
	}
	if len(d.fields) == 0 {
		r.errorf(d.name.pos, "layout %q has no fields", l.Name)
	}
	return l
}

// spellRef is a type reference as written.
func spellRef(t *astTypeRef) string {
	switch {
	case t.list:
		return "[]" + spellRef(t.elem)
	case t.array != "":
		return "[" + t.array + "]" + spellRef(t.elem)
	}
	return t.name
}

// eventSource sets where event ev comes from, and refuses a source its
// payload cannot come from: an input is fired by the application (or, in
// the explorer, by the world, which can enumerate events but not values),
// and a timer is set by a handler, keyed by its payload, never by a message.
func (r *resolver) eventSource(m *Machine, ev *Event, e *astEvent) {
	switch {
	case e.source == "input" && e.payload != nil:
		r.errorf(e.srcPos, "input event %s.%s carries a payload: inputs carry none (the explorer fires every input, and cannot enumerate values; declare one input per choice)", m.Name, ev.Name)
	case e.source == "timer" && ev.Message != nil:
		r.errorf(e.srcPos, "timer event %s.%s carries message %s: a timer fires locally, keyed by a payload that is no message", m.Name, ev.Name, ev.Message.Name)
	case e.source == "input":
		ev.Source = SourceInput
	case e.source == "timer":
		ev.Source = SourceTimer
	case ev.Message != nil:
		ev.Source = SourceMessage
	default:
		ev.Source = SourceInternal
	}
}
