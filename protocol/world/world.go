// Package world explores a protocol's handlers, the same code a node runs,
// with the model checker (package explore): it is the explore.Model of a
// set of nodes (machine instances) over a network of a chosen kind, with
// timers on a virtual clock, crashes and restarts, and the spec's table
// checked on every event. Choices, steps, copies and the canonical state
// are derived here, not written per protocol: handlers are copied and
// compared field by field (internal/deep), and messages cross the network
// encoded by the generated codecs, so every delivery decodes a frame as a
// real receiver would.
//
// What may happen next, in every state: a message in flight is delivered
// (in FIFO order per pair of nodes if the network keeps it), lost or
// duplicated (within the network's budgets); an input the table allows and
// the handler's guard accepts is fired; the earliest armed timer fires,
// moving the clock to it (not past a message's delivery bound, on a
// network with one); a node crashes (within its budget) or restarts.
//
// Violations: "spec" (an event the table neither handles nor ignores, a
// message the machine has no event for), "handler" (a handler's error, a
// send to no node, raises that never end), "codec" (a message that does
// not encode or decode), "hot" (a run that ends with a node in a hot
// state), "symmetry" (a node's name that a declared symmetry would rename
// held where the world cannot rename it: see Config.Symmetric), and the
// checks the Config names.
package world

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/rrefkit/rref/explore"
	"github.com/rrefkit/rref/genrt"
	"github.com/rrefkit/rref/internal/deep"
	"github.com/rrefkit/rref/protocol"
	"github.com/rrefkit/rref/protocol/internal/engine"
)

// Order is whether the network keeps the order of messages.
type Order uint8

const (
	// Unordered delivers any message in flight next.
	Unordered Order = iota
	// FIFO delivers the messages from one node to another in the order
	// sent, as a connection does (the node runtime's links keep it).
	FIFO
)

// Network is the kind of network the nodes share. The zero Network is
// reliable, unordered and unbounded.
type Network struct {
	Order Order
	// Loss is how many messages the network may lose in a run.
	Loss int
	// Duplicates is how many messages it may deliver twice.
	Duplicates int
	// Capacity bounds the messages in flight: one sent past it is lost
	// (0: no bound), as a full buffer drops.
	Capacity int
	// MaxDelay bounds how long a message stays in flight, on the virtual
	// clock: no timer fires past a message's bound before it is delivered
	// or lost (0: no bound; timers then fire in any order with messages).
	// Leases are safe only under such a bound.
	MaxDelay time.Duration
}

// Node is one machine instance.
type Node struct {
	Name protocol.NodeID
	Role *protocol.Role
	// Crashes is how many times the node may crash. A crash loses its
	// handler, its timers and the messages in flight to it; it restarts
	// with a new handler (Role.New), in the machine's start state, and its
	// start hook is given the record it last saved.
	Crashes int
}

// Check is a named invariant over the whole world.
type Check struct {
	Name  string // the violation's invariant
	Check func(w *World) error
}

// Config is a world to explore.
type Config struct {
	Network Network
	Nodes   []Node
	// Invariants are checked after every step, AtEnd when no step is left
	// (besides the built-in end check: no node in a hot state).
	Invariants []Check
	AtEnd      []Check
	// Tick lets the clock pass by Tick between any two events, while a
	// timer is armed or a message is in flight, up to the next timer and
	// within the messages' bound (0: the clock moves only as timers fire).
	// Without it a message takes no time unless a timer fires meanwhile,
	// so a handler that arms a timer as a message arrives arms it early.
	Tick time.Duration
	// Symmetric declares groups of interchangeable nodes, by name: nodes of
	// one machine and one crash budget, whose handlers differ only in the
	// names they hold. The world is then an explore.Symmetric, and the
	// search keeps one state of each class of states alike but for the
	// names of a group's nodes (see symmetry.go for what is renamed, what
	// Start refuses, and what handlers and checks must not do).
	Symmetric [][]protocol.NodeID
}

// Invariants the world itself checks.
const (
	InvariantSpec    = "spec"
	InvariantHandler = "handler"
	InvariantCodec   = "codec"
	InvariantHot     = "hot"
	// InvariantSymmetry is a name of a node of a symmetric group held in a
	// plain string (in a handler, a message, a timer's key or a saved
	// record), which the world's renamings cannot see.
	InvariantSymmetry = "symmetry"
)

// ErrConfig is matched by every error of Start.
var ErrConfig = errors.New("world: bad config")

// settings is what every world of one Config shares, read only.
type settings struct {
	net   Network
	nodes []Node
	index map[protocol.NodeID]int
	codec *protocol.Codec
	inv   []Check
	end   []Check
	tick  time.Duration
	sym   *symmetry // nil: no symmetric groups
}

// Start checks cfg and returns the start of its worlds, for explore.Explore.
func Start(cfg Config) (func() *World, error) {
	s := &settings{net: cfg.Network, nodes: slices.Clone(cfg.Nodes), index: map[protocol.NodeID]int{}, inv: cfg.Invariants, end: cfg.AtEnd, tick: cfg.Tick}
	if len(s.nodes) == 0 {
		return nil, fmt.Errorf("%w: no nodes", ErrConfig)
	}
	for i, n := range s.nodes {
		switch {
		case n.Name == "":
			return nil, fmt.Errorf("%w: node %d has no name", ErrConfig, i)
		case n.Role == nil || n.Role.Machine == nil || n.Role.New == nil:
			return nil, fmt.Errorf("%w: node %s has no role", ErrConfig, n.Name)
		case n.Crashes < 0:
			return nil, fmt.Errorf("%w: node %s may crash %d times", ErrConfig, n.Name, n.Crashes)
		}
		if _, dup := s.index[n.Name]; dup {
			return nil, fmt.Errorf("%w: two nodes are named %s", ErrConfig, n.Name)
		}
		s.index[n.Name] = i
		if s.codec == nil {
			s.codec = n.Role.Machine.Codec
		} else if s.codec != n.Role.Machine.Codec {
			return nil, fmt.Errorf("%w: node %s speaks protocol %s, node %s %s", ErrConfig, n.Name, n.Role.Machine.Codec.Name, s.nodes[0].Name, s.codec.Name)
		}
	}
	if cfg.Tick < 0 {
		return nil, fmt.Errorf("%w: negative tick %v", ErrConfig, cfg.Tick)
	}
	if s.net.Loss < 0 || s.net.Duplicates < 0 || s.net.Capacity < 0 || s.net.MaxDelay < 0 {
		return nil, fmt.Errorf("%w: negative network bound %+v", ErrConfig, s.net)
	}
	if len(cfg.Symmetric) > 0 {
		var err error
		if s.sym, err = newSymmetry(s, cfg.Symmetric); err != nil {
			return nil, err
		}
	}
	first := newWorld(s)
	if v := first.violation; v != nil && (v.Invariant == InvariantHandler || v.Invariant == InvariantSymmetry) {
		// A handler the world cannot copy or compare, or a start hook that
		// fails, fails every run alike: say so now.
		if v.Invariant == InvariantSymmetry {
			return nil, refuse("%s", v.Detail)
		}
		return nil, fmt.Errorf("%w: %s", ErrConfig, v.Detail)
	}
	if s.sym != nil {
		if err := first.checkSymmetric(); err != nil {
			return nil, err
		}
	}
	return func() *World { return newWorld(s) }, nil
}

// World is one state of the explored system: an explore.Model.
type World struct {
	s         *settings
	now       time.Duration
	nodes     []*node // shared with clones until written: see mut
	owned     []bool  // which nodes this world made since it was cloned
	net       []packet
	loss      int
	dups      int
	violation *explore.Violation
	choices   []choice // what Choices last listed, for Step and Describe
	// fp records what the last step touched (commute.go); shared by a
	// world's clones, as the search copies it after each step.
	fp *explore.Footprint
}

type node struct {
	state   int
	up      bool
	handler any
	timers  []timer    // sorted by event, then key
	saved   string     // the durable record, framed; "" when none
	crashes int        // left
	enc     []byte     // the handler's canonical encoding, made after each step
	named   bool       // whether the handler holds a name of a symmetric group's node
	cache   *nodeCache // with symmetric groups: the node renamed, made as asked
}

type timer struct {
	event   int
	key     string // the payload's canonical encoding
	payload any
	at      time.Duration
	named   bool // whether the payload holds a name of a symmetric group's node
}

type packet struct {
	from, to int
	frame    string
	deadline time.Duration // when MaxDelay is set
}

type choiceKind uint8

const (
	deliver choiceKind = iota
	lose
	duplicate
	input
	fire
	tick
	crash
	restart
)

type choice struct {
	kind  choiceKind
	node  int
	event int // input
	index int // the packet, or the node's timer
}

func newWorld(s *settings) *World {
	w := &World{s: s, nodes: make([]*node, len(s.nodes)), owned: make([]bool, len(s.nodes)), loss: s.net.Loss, dups: s.net.Duplicates, fp: new(explore.Footprint)}
	for i, n := range s.nodes {
		w.nodes[i] = &node{crashes: n.Crashes, up: true} // up before any start hook sends to it
		w.owned[i] = true
	}
	for i := range w.nodes {
		w.begin(i)
	}
	w.monitor()
	return w
}

// begin starts node i: a new handler in the start state, its start hook
// run with the record it saved.
func (w *World) begin(i int) {
	n, m := w.nodes[i], w.s.nodes[i].Role.Machine
	n.up, n.state, n.handler, n.timers = true, m.Start, w.s.nodes[i].Role.New(), nil
	var saved any
	if n.saved != "" {
		var err error
		if saved, err = w.s.codec.Decode([]byte(n.saved)); err != nil {
			w.fail(InvariantCodec, "node %s: its saved record does not decode: %v", w.name(i), err)
			return
		}
	}
	h := w.host(i)
	if err := m.Begin(n.handler, h, saved); err != nil {
		w.settle(h, fmt.Errorf("start: %w", err))
		return
	}
	w.settle(h, h.in.Drain(h))
}

func (w *World) name(i int) protocol.NodeID { return w.s.nodes[i].Name }

func (w *World) fail(inv, format string, args ...any) {
	if w.violation == nil {
		w.violation = &explore.Violation{Invariant: inv, Detail: fmt.Sprintf(format, args...)}
	}
}

// mut returns node i for writing, copying it first if a clone shares it.
func (w *World) mut(i int) *node {
	if w.owned == nil {
		w.owned = make([]bool, len(w.nodes))
	}
	if !w.owned[i] {
		n := *w.nodes[i]
		n.timers = slices.Clone(n.timers)
		h, err := deep.Copy(n.handler)
		if err != nil {
			w.fail(InvariantHandler, "node %s: %v", w.name(i), err)
		}
		n.handler, n.enc, n.cache = h, nil, nil
		w.nodes[i], w.owned[i] = &n, true
	}
	return w.nodes[i]
}

// Clone implements explore.Model: nodes are shared until a step writes one.
func (w *World) Clone() *World {
	c := *w
	c.nodes = slices.Clone(w.nodes)
	c.owned = nil
	c.net = slices.Clone(w.net)
	return &c
}

// Machines implements explore.Coverer: the machines the world's nodes run,
// each once, so that a coverage report lists a machine no run stepped too.
func (w *World) Machines() []*genrt.MachineInfo {
	var ms []*genrt.MachineInfo
	for _, n := range w.s.nodes {
		if info := n.Role.Machine.Info; !slices.Contains(ms, info) {
			ms = append(ms, info)
		}
	}
	return ms
}

// Violation implements explore.Model.
func (w *World) Violation() *explore.Violation { return w.violation }

// deliverable reports whether packet j may be delivered next: on a FIFO
// network, no earlier message of its pair is in flight.
func (w *World) deliverable(j int) bool {
	if w.s.net.Order != FIFO {
		return true
	}
	p := w.net[j]
	for _, q := range w.net[:j] {
		if q.from == p.from && q.to == p.to {
			return false
		}
	}
	return true
}

// Choices implements explore.Model.
func (w *World) Choices() []int {
	w.choices = w.list()
	out := make([]int, len(w.choices))
	for i := range out {
		out[i] = i
	}
	return out
}

func (w *World) list() []choice {
	var out []choice
	seen := map[packet]bool{}
	for j, p := range w.net {
		if seen[p] || !w.deliverable(j) {
			continue // a copy of one already offered: delivering it does the same
		}
		seen[p] = true
		out = append(out, choice{kind: deliver, index: j})
		if w.loss > 0 {
			out = append(out, choice{kind: lose, index: j})
		}
		if w.dups > 0 {
			out = append(out, choice{kind: duplicate, index: j})
		}
	}
	for i, n := range w.nodes {
		if !n.up {
			continue
		}
		m := w.s.nodes[i].Role.Machine
		for e, src := range m.Sources {
			if src != protocol.Input {
				continue
			}
			if _, out2, err := m.Step(n.state, e); err != nil || out2 != genrt.Moved || !m.Enabled(n.handler, e) {
				continue // moves only: an ignored input changes nothing
			}
			out = append(out, choice{kind: input, node: i, event: e})
		}
	}
	if at, ok := w.nextTimer(); ok {
		for i, n := range w.nodes {
			for k, t := range n.timers {
				if t.at == at {
					out = append(out, choice{kind: fire, node: i, index: k})
				}
			}
		}
	}
	if w.canTick() {
		out = append(out, choice{kind: tick})
	}
	for i, n := range w.nodes {
		switch {
		case n.up && n.crashes > 0:
			out = append(out, choice{kind: crash, node: i})
		case !n.up:
			out = append(out, choice{kind: restart, node: i})
		}
	}
	return out
}

// nextTimer is when the earliest timer is due, if it may fire: not past
// the bound of a message in flight.
func (w *World) nextTimer() (time.Duration, bool) {
	at, ok := time.Duration(0), false
	for _, n := range w.nodes {
		for _, t := range n.timers {
			if !ok || t.at < at {
				at, ok = t.at, true
			}
		}
	}
	if ok && w.s.net.MaxDelay > 0 {
		for _, p := range w.net {
			if p.deadline < at {
				return 0, false
			}
		}
	}
	return at, ok
}

// canTick reports whether the clock may pass by a tick now: something
// waits on it, and nothing is due before.
func (w *World) canTick() bool {
	if w.s.tick == 0 {
		return false
	}
	then, waits := w.now+w.s.tick, false
	for _, n := range w.nodes {
		for _, t := range n.timers {
			if t.at < then {
				return false
			}
			waits = true
		}
	}
	if w.s.net.MaxDelay > 0 {
		for _, p := range w.net {
			if p.deadline < then {
				return false
			}
			waits = true
		}
	}
	return waits
}

func (w *World) choice(c int) choice {
	if w.choices == nil {
		w.choices = w.list()
	}
	return w.choices[c]
}

// Step implements explore.Model.
func (w *World) Step(c int) {
	ch := w.choice(c)
	w.choices = nil
	w.fp.Reset()
	switch ch.kind {
	case deliver:
		p := w.net[ch.index]
		w.takePacket(p)
		w.touchNode(p.to)
		w.net = slices.Delete(w.net, ch.index, ch.index+1)
		w.deliver(p)
	case lose:
		w.takePacket(w.net[ch.index])
		w.writeBudget(0)
		w.net = slices.Delete(w.net, ch.index, ch.index+1)
		w.loss--
	case duplicate:
		// It needs the packet there, as a delivery or a loss takes it.
		w.fp.Read(explore.Location(tablePacket, packetKey(w.net[ch.index])))
		w.fp.Add(tableNet)
		w.writeBudget(1)
		w.net = slices.Insert(w.net, ch.index+1, w.net[ch.index])
		w.dups--
	case input:
		w.touchNode(ch.node)
		w.dispatch(ch.node, ch.event, "", nil)
	case fire:
		// Offered as the earliest timer of all, and not past a message's
		// deadline: it reads every timer and, under a bound, the network.
		w.touchNode(ch.node)
		w.writeTimers()
		w.writeClock()
		if w.s.net.MaxDelay > 0 {
			w.fp.ReadTable(tableNet)
		}
		n := w.mut(ch.node)
		t := n.timers[ch.index]
		n.timers = slices.Delete(n.timers, ch.index, ch.index+1)
		w.now = max(w.now, t.at)
		w.dispatch(ch.node, t.event, "", t.payload)
	case tick:
		w.fp.Everything() // every deadline and timer moves closer
		w.now += w.s.tick
	case crash:
		n := w.mut(ch.node)
		n.up, n.handler, n.timers, n.enc, n.named = false, nil, nil, nil, false
		if w.s.sym != nil {
			n.cache = &nodeCache{}
		}
		n.crashes--
		w.net = slices.DeleteFunc(w.net, func(p packet) bool { return p.to == ch.node })
	case restart:
		w.mut(ch.node)
		w.begin(ch.node)
	}
	if ch.kind == crash || ch.kind == restart {
		w.fp.Everything() // messages to it dropped, every send to it changes
	}
	w.monitor()
}

func (w *World) deliver(p packet) {
	msg, err := w.s.codec.Decode([]byte(p.frame))
	if err != nil {
		w.fail(InvariantCodec, "a frame from %s to %s does not decode: %v", w.name(p.from), w.name(p.to), err)
		return
	}
	n, m := w.nodes[p.to], w.s.nodes[p.to].Role.Machine
	e, ok := m.EventOf(n.state, msg)
	if !ok {
		w.fail(InvariantSpec, "node %s: %v", w.name(p.to), protocol.Undeclared(m, n.state, fmt.Sprintf("no event carries message %s from %s", describeMessage(msg), w.name(p.from))))
		return
	}
	w.dispatch(p.to, e, w.name(p.from), msg)
}

// dispatch steps event at node i through the table, runs its handler, and
// then the events its handlers raise, to completion.
func (w *World) dispatch(i, event int, from protocol.NodeID, payload any) {
	h := w.host(i)
	w.settle(h, h.in.Run(h, event, from, payload))
}

func (w *World) host(i int) *host {
	n := w.mut(i)
	return &host{w: w, i: i, in: &engine.Instance{Machine: w.s.nodes[i].Role.Machine, State: n.state, Handler: n.handler}}
}

// settle keeps what a step did to node i: its state, its handler's
// encoding, and its failure.
func (w *World) settle(h *host, err error) {
	n := w.nodes[h.i]
	n.state = h.in.State
	switch {
	case err == nil:
	case errors.Is(err, protocol.ErrUndeclared):
		w.fail(InvariantSpec, "node %s: %v", h.Self(), err)
	default:
		w.fail(InvariantHandler, "node %s: %v", h.Self(), err)
	}
	enc, named, err := w.encode(n.handler)
	w.failEncoding(h.i, "its handler", err)
	n.enc, n.named = enc, named
	if w.s.sym != nil {
		n.cache = &nodeCache{}
	}
}

// failEncoding reports the error of encoding what node i holds or sends.
func (w *World) failEncoding(i int, what string, err error) {
	switch {
	case err == nil:
	case errors.Is(err, errPlainName):
		w.fail(InvariantSymmetry, "node %s: %s %v (hold it as a protocol.NodeID, node in a spec, or declare no symmetry)", w.name(i), what, err)
	default:
		w.fail(InvariantHandler, "node %s: %s: %v", w.name(i), what, err)
	}
}

// host is the world under a node's handlers while one step runs.
type host struct {
	w  *World
	i  int
	in *engine.Instance
}

func (h *host) Self() protocol.NodeID { return h.w.name(h.i) }
func (h *host) Now() time.Duration    { h.w.readClock(); return h.w.now }
func (h *host) Logf(string, ...any)   {}
func (h *host) Raise(e int, payload any) {
	h.in.Raised = append(h.in.Raised, engine.Raised{Event: e, Payload: payload})
}
func (h *host) CancelTimer(e int, payload any) { h.setTimer(e, -1, payload) }

func (h *host) SetTimer(e int, d time.Duration, payload any) { h.setTimer(e, max(d, 0), payload) }

// setTimer arms (d >= 0) or disarms (d < 0) timer e keyed by payload.
func (h *host) setTimer(e int, d time.Duration, payload any) {
	key, named, err := h.w.encode(payload)
	if err != nil {
		h.w.failEncoding(h.i, "a timer's key", err)
		return
	}
	payload, _ = deep.Copy(payload)
	h.w.readClock() // its time is the clock's plus d
	h.w.writeTimers()
	n := h.w.nodes[h.i]
	t := timer{event: e, key: string(key), payload: payload, at: h.w.now + d, named: named}
	k, found := slices.BinarySearchFunc(n.timers, t, func(a, b timer) int {
		if a.event != b.event {
			return a.event - b.event
		}
		return strings.Compare(a.key, b.key)
	})
	switch {
	case d < 0 && found:
		n.timers = slices.Delete(n.timers, k, k+1)
	case d < 0:
	case found:
		n.timers[k] = t
	default:
		n.timers = slices.Insert(n.timers, k, t)
	}
}

func (h *host) Send(to protocol.NodeID, m any) {
	w := h.w
	j, ok := w.s.index[to]
	if !ok {
		w.fail(InvariantHandler, "node %s sent %s to %s, which is no node", h.Self(), describeMessage(m), to)
		return
	}
	if !w.plainNamesIn(h.i, "a message it sent", m) {
		return
	}
	frame, err := w.s.codec.Append(nil, m)
	if err != nil {
		w.fail(InvariantCodec, "node %s: send: %v", h.Self(), err)
		return
	}
	if w.s.net.Capacity > 0 {
		w.fp.ReadTable(tableNet) // whether it is full
	}
	if w.s.net.MaxDelay > 0 {
		w.readClock() // its deadline
	}
	w.fp.Add(tableNet)
	if !w.nodes[j].up || (w.s.net.Capacity > 0 && len(w.net) >= w.s.net.Capacity) {
		return // to a crashed node, or past a full network: lost
	}
	w.net = append(w.net, packet{from: h.i, to: j, frame: string(frame), deadline: w.now + w.s.net.MaxDelay})
}

func (h *host) Save(m any) {
	if !h.w.plainNamesIn(h.i, "the record it saved", m) {
		return
	}
	frame, err := h.w.s.codec.Append(nil, m)
	if err != nil {
		h.w.fail(InvariantCodec, "node %s: save: %v", h.Self(), err)
		return
	}
	h.w.nodes[h.i].saved = string(frame)
}

func (w *World) monitor() {
	for _, c := range w.s.inv {
		if w.violation != nil {
			return
		}
		if err := c.Check(w); err != nil {
			w.fail(c.Name, "%v", err)
		}
	}
}

// CheckEnd implements explore.Model.
func (w *World) CheckEnd() {
	if hot := w.Hot(); hot != "" {
		w.fail(InvariantHot, "the run ended with %s", hot)
	}
	for _, c := range w.s.end {
		if w.violation != nil {
			return
		}
		if err := c.Check(w); err != nil {
			w.fail(c.Name, "%v", err)
		}
	}
}

// Hot implements explore.Hotter: the nodes in hot states.
func (w *World) Hot() string {
	var hot []string
	for i, n := range w.nodes {
		if m := w.s.nodes[i].Role.Machine; n.up && m.Hot(n.state) {
			hot = append(hot, fmt.Sprintf("%s %s", w.name(i), m.StateName(n.state)))
		}
	}
	return strings.Join(hot, ", ")
}

// Agent implements explore.Agents: a node takes its deliveries, inputs and
// timers; its crashes and the network's faults are agents of their own.
func (w *World) Agent(c int) string {
	ch := w.choice(c)
	switch ch.kind {
	case deliver:
		return string(w.name(w.net[ch.index].to))
	case lose, duplicate:
		return "network"
	case tick:
		return "clock"
	case crash, restart:
		return "crash " + string(w.name(ch.node))
	}
	return string(w.name(ch.node))
}

// AppendState implements explore.Model. Times are kept relative to the
// clock, so states that differ only by when they happen are one.
func (w *World) AppendState(b []byte) []byte {
	for i := range w.nodes {
		b = w.appendNode(b, i, nil)
	}
	return w.appendNet(b, nil)
}

// appendNode encodes node i with the names renamed by r (nil: as it is).
func (w *World) appendNode(b []byte, i int, r *renaming) []byte {
	n := w.nodes[i]
	timers := n.timers
	if r == nil {
		b = appendHead(b, n, n.saved, n.enc, len(timers))
	} else {
		rn := w.renamedNode(i, r)
		b, timers = append(b, rn.head...), rn.timers
	}
	for _, t := range timers {
		b = binary.AppendUvarint(b, uint64(t.event))
		b = appendString(b, t.key)
		b = binary.AppendVarint(b, int64(t.at-w.now))
	}
	return b
}

func appendString(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

// appendHead encodes node n but its timers, with its saved record and
// handler's encoding as given.
func appendHead(b []byte, n *node, saved string, enc []byte, timers int) []byte {
	up := byte(0)
	if n.up {
		up = 1
	}
	b = binary.AppendUvarint(append(b, up), uint64(n.state))
	b = appendString(binary.AppendUvarint(b, uint64(n.crashes)), saved)
	b = append(binary.AppendUvarint(b, uint64(len(enc))), enc...)
	return binary.AppendUvarint(b, uint64(timers))
}

// appendNet encodes the messages in flight and the network's budgets,
// with the names renamed by r (nil: as they are).
func (w *World) appendNet(b []byte, r *renaming) []byte {
	type msg struct {
		from, to int
		rest     string // its time left and frame
	}
	msgs := make([]msg, len(w.net))
	var buf []byte
	for j, p := range w.net {
		from, to, frame := p.from, p.to, p.frame
		if r != nil {
			from, to, frame = r.to[from], r.to[to], w.renameFrame(frame, r)
		}
		buf = appendString(binary.AppendVarint(buf[:0], int64(max(p.deadline-w.now, 0))), frame)
		msgs[j] = msg{from, to, string(buf)}
	}
	byPair := func(a, b msg) int {
		if a.from != b.from {
			return a.from - b.from
		}
		return a.to - b.to
	}
	if w.s.net.Order == FIFO {
		// Only each pair's own order matters.
		slices.SortStableFunc(msgs, byPair)
	} else {
		slices.SortFunc(msgs, func(a, b msg) int {
			if c := byPair(a, b); c != 0 {
				return c
			}
			return strings.Compare(a.rest, b.rest)
		})
	}
	b = binary.AppendUvarint(b, uint64(len(msgs)))
	for _, m := range msgs {
		b = binary.AppendUvarint(binary.AppendUvarint(b, uint64(m.from)), uint64(m.to))
		b = append(b, m.rest...)
	}
	b = binary.AppendUvarint(b, uint64(w.loss))
	return binary.AppendUvarint(b, uint64(w.dups))
}

// Describe implements explore.Model.
func (w *World) Describe(c int) string {
	ch := w.choice(c)
	switch ch.kind {
	case deliver, lose, duplicate:
		verb := [...]string{deliver: "deliver", lose: "lose", duplicate: "duplicate"}[ch.kind]
		return verb + " " + w.describePacket(w.net[ch.index])
	case input:
		return fmt.Sprintf("%s: input %s", w.name(ch.node), w.s.nodes[ch.node].Role.Machine.EventName(ch.event))
	case fire:
		t := w.nodes[ch.node].timers[ch.index]
		arg := ""
		if t.payload != nil {
			arg = fmt.Sprintf("(%v)", t.payload)
		}
		return fmt.Sprintf("%s: timer %s%s at %v", w.name(ch.node), w.s.nodes[ch.node].Role.Machine.EventName(t.event), arg, t.at)
	case tick:
		return fmt.Sprintf("%v passes", w.s.tick)
	case crash:
		return fmt.Sprintf("%s crashes", w.name(ch.node))
	}
	return fmt.Sprintf("%s restarts", w.name(ch.node))
}

// ChoiceKey implements explore.Model.
func (w *World) ChoiceKey(c int) string {
	ch := w.choice(c)
	switch ch.kind {
	case deliver, lose, duplicate:
		p := w.net[ch.index]
		return fmt.Sprintf("%d %d>%d %q", ch.kind, p.from, p.to, p.frame)
	case fire:
		t := w.nodes[ch.node].timers[ch.index]
		return fmt.Sprintf("%d %d %d %q", ch.kind, ch.node, t.event, t.key)
	}
	return fmt.Sprintf("%d %d %d", ch.kind, ch.node, ch.event)
}

func (w *World) describePacket(p packet) string {
	msg, err := w.s.codec.Decode([]byte(p.frame))
	if err != nil {
		return fmt.Sprintf("a bad frame %s -> %s", w.name(p.from), w.name(p.to))
	}
	return fmt.Sprintf("%s %s -> %s", describeMessage(msg), w.name(p.from), w.name(p.to))
}

// describeMessage is a message as traces show it: its type and fields.
func describeMessage(m any) string {
	s := fmt.Sprintf("%+v", m)
	t := fmt.Sprintf("%T", m)
	return t[strings.LastIndexByte(t, '.')+1:] + strings.TrimPrefix(s, "&")
}
