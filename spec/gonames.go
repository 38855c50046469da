package spec

import (
	gotoken "go/token"
	"strings"
	"unicode"
)

// DefaultInitialisms are spelled in capitals in Go names, as golint asks:
// a spec name part "id" becomes "ID", "rref" becomes "RRef".
var DefaultInitialisms = map[string]string{
	"id": "ID", "rref": "RRef", "rpc": "RPC", "url": "URL", "http": "HTTP", "json": "JSON",
	"tcp": "TCP", "ip": "IP", "api": "API", "shm": "SHM", "io": "IO",
}

// Options adjust how a spec is resolved.
type Options struct {
	// Initialisms are added to DefaultInitialisms: each word is spelled in
	// capitals wherever it is a part of a name ("vmid" makes vm_id VMID).
	Initialisms []string
}

func (o Options) initialisms() map[string]string {
	out := make(map[string]string, len(DefaultInitialisms)+len(o.Initialisms))
	for k, v := range DefaultInitialisms {
		out[k] = v
	}
	for _, w := range o.Initialisms {
		if w = strings.TrimSpace(w); w != "" {
			out[strings.ToLower(w)] = strings.ToUpper(w)
		}
	}
	return out
}

// GoName turns a spec name (snake_case, or already CamelCase) into an
// exported Go name, spelling initialisms in capitals. It may return a name
// that is not a Go identifier ("_" gives ""): the resolver refuses those.
func GoName(s string, initialisms map[string]string) string {
	if s == "" {
		return s
	}
	if !strings.Contains(s, "_") && unicode.IsUpper(rune(s[0])) {
		return s
	}
	var b strings.Builder
	for _, part := range strings.Split(s, "_") {
		if part == "" {
			continue
		}
		if v, ok := initialisms[part]; ok {
			b.WriteString(v)
			continue
		}
		if v, ok := initialisms[strings.TrimSuffix(part, "s")]; ok && strings.HasSuffix(part, "s") {
			b.WriteString(v + "s") // rrefs -> RRefs, ids -> IDs
			continue
		}
		b.WriteString(strings.ToUpper(part[:1]) + part[1:])
	}
	return b.String()
}

// LowerFirst makes an unexported Go name from an exported one, keeping a
// leading initialism readable (RRefID -> rrefID).
func LowerFirst(s string, initialisms map[string]string) string {
	if s == "" {
		return s
	}
	// The longest initialism that starts s, so that the result does not
	// depend on the map's order.
	best := ""
	for _, v := range initialisms {
		if strings.HasPrefix(s, v) && v != s && len(v) > len(best) {
			best = v
		}
	}
	if best != "" {
		return strings.ToLower(best) + s[len(best):]
	}
	return strings.ToLower(s[:1]) + s[1:]
}

// FixedGoNames are the package-level identifiers rrefgen writes for every
// spec; no declaration may take one.
var FixedGoNames = []string{"Code", "Codes", "Message", "FrameVersion", "SizeFrame", "AppendFrame",
	"DecodeHeader", "Decode", "Decoder", "Machines", "Invariants",
	// and in its tests:
	"TestMessagesRoundTrip", "TestControlMessagesDecodeWithoutAllocating", "TestMachinesMatchTheirTables", "FuzzDecode",
	"TestLayoutsRoundTrip", "FuzzLayouts"}

// fixedUnexported are the unexported package-level identifiers rrefgen
// writes for every spec.
var fixedUnexported = []string{"messageSamples", "protocolCodec"}

// machineSuffixes make the exported identifiers rrefgen writes for each
// machine M: MState, MEvent, MStart and MMachine (machines.go), and the
// handler interface, its environment, its guard and start hook, and the
// role that binds handlers to the machine (handlers.go).
var machineSuffixes = []string{"State", "Event", "Start", "Machine", "Handler", "Env", "Guard", "Starter", "Role"}

// messageMethods are the methods every generated message type has: a field
// of the same Go name would not compile.
var messageMethods = map[string]bool{"MessageCode": true, "AppendBody": true, "BodySize": true}

// goNames computes every Go name of the resolved protocol once, and refuses
// a spec whose names would not make a compiling package: a name with no Go
// spelling, two declarations that become one identifier, a field that
// shadows a generated method, a package name Go reserves.
func (r *resolver) goNames(protocolPos Pos, opt Options) {
	p := r.p
	init := opt.initialisms()
	if p.Name != "" && (!gotoken.IsIdentifier(p.Name) || gotoken.IsKeyword(p.Name)) {
		r.errorf(protocolPos, "protocol name %q is not a Go package name (it is a keyword or not an identifier)", p.Name)
	}
	if p.Name == "main" {
		r.errorf(protocolPos, "protocol name \"main\" would make a package no one can import")
	}
	if p.Name == "_" {
		r.errorf(protocolPos, "protocol name \"_\" is not a Go package name")
	}
	// Names Go accepts in a package clause that no one can use: the
	// compiler refuses to import a package as init, the go command skips
	// a package named documentation, and reads the generated tests of a
	// package named x_test as the external tests of a package x.
	switch {
	case p.Name == "init":
		r.errorf(protocolPos, "protocol name \"init\" would make a package no one can import (Go keeps init for functions)")
	case p.Name == "documentation":
		r.errorf(protocolPos, "protocol name \"documentation\" would make a package the go command ignores")
	case strings.HasSuffix(p.Name, "_test"):
		r.errorf(protocolPos, "protocol name %q ends in _test: the go command would read the generated tests as a second package", p.Name)
	}
	// Sized for every identifier the package will declare: grown one
	// insertion at a time, a spec of 100,000 structs spent a third of its
	// check rehashing.
	top := make(map[string]claim, len(FixedGoNames)+topNames(p))
	for _, n := range FixedGoNames {
		top[n] = claim{what: "a declaration rrefgen writes in every package"}
	}
	// name computes a declaration's Go name and reports one that is not
	// an exported identifier.
	name := func(s string, pos Pos, what string) (string, bool) {
		gn := GoName(s, init)
		if !gotoken.IsIdentifier(gn) || !gotoken.IsExported(gn) {
			r.errorf(pos, "%s %q has no Go name (%q is not an exported Go identifier): start it with a letter", what, s, gn)
			return gn, false
		}
		return gn, true
	}
	take := func(gn string, pos Pos, what string) {
		if first, dup := top[gn]; dup {
			if first.pos.Line > 0 {
				r.errorf(pos, "%s becomes Go identifier %s, as %s does (at %s)", what, gn, first.what, first.pos)
			} else {
				r.errorf(pos, "%s becomes Go identifier %s, which is %s", what, gn, first.what)
			}
			return
		}
		top[gn] = claim{what: what, pos: pos}
	}
	fields := func(owner string, fs []*Field, isMessage bool) {
		seen := map[string]*Field{}
		for _, f := range fs {
			gn, ok := name(f.Name, f.Pos, "field")
			f.GoName = gn
			if !ok {
				continue
			}
			if first, dup := seen[gn]; dup {
				r.errorf(f.Pos, "fields %s.%s and %s.%s both become Go field %s (%s)", owner, first.Name, owner, f.Name, gn, first.Pos)
				continue
			}
			seen[gn] = f
			if isMessage && messageMethods[gn] {
				r.errorf(f.Pos, "field %s.%s becomes Go field %s, the name of a method every message has", owner, f.Name, gn)
			}
		}
	}

	for _, n := range p.Named {
		if gn, ok := name(n.Name, n.Pos, "type"); ok {
			n.GoName = gn
			take(gn, n.Pos, "type "+n.Name)
		}
	}
	for _, e := range p.Enums {
		gn, ok := name(e.Name, e.Pos, "enum")
		e.GoName = gn
		if ok {
			take(gn, e.Pos, "enum "+e.Name)
		}
		for _, v := range e.Values {
			if vn, vok := name(v.Name, v.Pos, "enum value"); vok && ok {
				v.GoName = gn + vn
				take(v.GoName, v.Pos, "enum value "+e.Name+"."+v.Name)
			}
		}
	}
	// The unexported package-level names: machines' tables, recursive
	// structs' decoders.
	unexported := map[string]string{}
	for _, n := range fixedUnexported {
		unexported[n] = "a declaration rrefgen writes in every package"
	}
	for _, s := range p.Structs {
		gn, ok := name(s.Name, s.Pos, "struct")
		s.GoName = gn
		if ok {
			for _, pre := range []string{"", "Size", "Append", "Consume"} {
				take(pre+gn, s.Pos, "struct "+s.Name)
			}
			if s.Recursive {
				s.GoConsume = "consume" + gn
				unexported[s.GoConsume] = "struct " + s.Name
			}
		}
		fields(s.Name, s.Fields, false)
	}
	decoderFields := map[string]string{"Limits": "the decoder's limits"}
	for _, m := range p.Messages {
		gn, ok := name(m.Name, m.Pos, "message")
		m.GoName = gn
		if ok {
			for _, pre := range []string{"", "Size", "Append", "Consume", "Code"} {
				take(pre+gn, m.Pos, "message "+m.Name)
			}
			slot := LowerFirst(gn, init) + "Msg"
			m.GoSlot = slot
			if other, dup := decoderFields[slot]; dup {
				r.errorf(m.Pos, "message %s and %s share the decoder's slot %s", m.Name, other, slot)
			}
			decoderFields[slot] = "message " + m.Name
		}
		fields(m.Name, m.Fields, true)
	}
	for _, l := range p.Layouts {
		gn, ok := name(l.Name, l.Pos, "layout")
		l.GoName = gn
		if ok {
			for _, pre := range []string{"", "Size", "Append", "Consume"} {
				take(pre+gn, l.Pos, "layout "+l.Name)
			}
		}
		seen := map[string]*LayoutField{}
		for _, f := range l.Fields {
			fn, ok := name(f.Name, f.Pos, "field")
			f.GoName = fn
			if !ok {
				continue
			}
			if first, dup := seen[fn]; dup {
				r.errorf(f.Pos, "fields %s.%s and %s.%s both become Go field %s (%s)", l.Name, first.Name, l.Name, f.Name, fn, first.Pos)
				continue
			}
			seen[fn] = f
		}
	}
	for _, m := range p.Machines {
		mn, ok := name(m.Name, m.Pos, "machine")
		m.GoName = mn
		if !ok {
			continue
		}
		for _, suf := range machineSuffixes {
			take(mn+suf, m.Pos, "machine "+m.Name)
		}
		take("Step"+mn, m.Pos, "machine "+m.Name)
		low := LowerFirst(mn, init)
		m.GoTable, m.GoEnvImpl, m.GoBridge = low+"Table", low+"Env", low+"Bridge"
		for _, n := range []string{m.GoTable, m.GoEnvImpl, m.GoBridge} {
			if other, dup := unexported[n]; dup {
				r.errorf(m.Pos, "machine %s becomes Go identifier %s, as %s does", m.Name, n, other)
			}
			unexported[n] = "machine " + m.Name
		}
		for _, s := range m.States {
			if sn, ok := name(s.Name, s.Pos, "state"); ok {
				s.GoName = mn + sn
				take(s.GoName, s.Pos, "state "+m.Name+"."+s.Name)
			}
		}
		carriers := map[*Message]int{} // how many of the machine's events carry each message
		for _, e := range m.Events {
			if e.Message != nil {
				carriers[e.Message]++
			}
		}
		for _, e := range m.Events {
			if en, ok := name(e.Name, e.Pos, "event"); ok {
				e.GoName = mn + "On" + en
				e.GoPart = en
				take(e.GoName, e.Pos, "event "+m.Name+"."+e.Name)
				if e.Message != nil {
					e.GoStep = "Step" + e.GoName
					take(e.GoStep, e.Pos, "event "+m.Name+"."+e.Name)
					if m.GoDispatch == "" && carriers[e.Message] == 1 {
						m.GoDispatch = "Step" + mn + "OnMessage"
						take(m.GoDispatch, m.Pos, "machine "+m.Name)
					}
				}
			}
		}
	}
	for _, inv := range p.Invariants {
		if in, ok := name(inv.Name, inv.Pos, "invariant"); ok {
			inv.GoName = "Invariant" + in
			take(inv.GoName, inv.Pos, "invariant "+inv.Name)
		}
	}
}

// topNames counts the package-level identifiers goNames claims for p's
// declarations (as in its calls of take).
func topNames(p *Protocol) int {
	const (
		perStruct  = 4  // S, SizeS, AppendS, ConsumeS (a layout's too)
		perMessage = 5  // M, SizeM, AppendM, ConsumeM, CodeM
		perMachine = 11 // machineSuffixes, Step and dispatch
		perEvent   = 2  // the event's constant and its step
	)
	n := len(p.Named) + len(p.Invariants) + perStruct*(len(p.Structs)+len(p.Layouts)) + perMessage*len(p.Messages)
	for _, e := range p.Enums {
		n += 1 + len(e.Values)
	}
	for _, m := range p.Machines {
		n += perMachine + len(m.States) + perEvent*len(m.Events)
	}
	return n
}

// claim is who took a Go identifier first.
type claim struct {
	what string
	pos  Pos
}
