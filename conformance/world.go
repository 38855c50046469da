package conformance

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/rrefkit/rref/explore"
	"github.com/rrefkit/rref/generated/rref"
	"github.com/rrefkit/rref/internal/scenario"
	"github.com/rrefkit/rref/runtime/core"
)

type (
	WorkerID = rref.WorkerID
	RRefID   = rref.RRefID
	ForkID   = rref.ForkID
)

type inFlight struct {
	from, to WorkerID
	notice   bool // `to` learns that `from` failed
	// flush: `to`'s timer for the RemoteRet it held back for ack fires
	// (core.WithDeferredAcks); from is `to`. Pending like a message, it
	// may fire before or after anything else in flight.
	flush bool
	ack   RRefID
	msg   rref.Message
	// digest names the message for de-duplicating choices and for the
	// state key: of its sender, receiver, then its frame (or "notice", or
	// the flush and its value).
	digest digest
}

func (m inFlight) String() string {
	switch {
	case m.notice:
		return fmt.Sprintf("notice to %d: worker %d failed", m.to, m.from)
	case m.flush:
		return fmt.Sprintf("ack timer of %d for %d:%d", m.to, m.ack.Worker, m.ack.Local)
	}
	return fmt.Sprintf("%d->%d %s", m.from, m.to, core.FormatMessage(m.msg))
}

// isMessage reports whether m is a message (not a notice or a timer).
func (m inFlight) isMessage() bool { return !m.notice && !m.flush }

type dupRule struct {
	from, to WorkerID
	kind     string
}

type handleKey struct {
	w    WorkerID
	name string
}

type progHandle struct {
	key      handleKey // set in a fetch's copy of the handle
	id       core.HandleID
	released bool
	rref     RRefID
	fork     ForkID // zero for a handle on the owner
	onOwner  bool
	timedOut bool
}

// fetchState is a fetch the program issued (the last of each handle name
// is kept for expectations), with the handle it was issued on: a name may
// be bound again while the fetch is in flight.
type fetchState struct {
	done        bool
	value       []byte
	err         rref.ErrorKind
	liveAtIssue bool
	timedOut    bool
	issued      progHandle // the handle as it was when the fetch was issued
	holds       scenario.Holding
}

// travelling is a handle on its way to a program: passed or returned, not yet bound.
type travelling struct {
	to   WorkerID
	name string
	rref RRefID
	fork ForkID
}

// monitor is the ground truth the invariants are checked against. It only
// observes: what programs did, and what cores emitted.
type monitor struct {
	values        cowMap[RRefID, int64] // expected value; absent for a failing remote
	failing       cowMap[RRefID, bool]
	deletes       cowMap[ForkID, int]
	answered      cowMap[ForkID, bool]
	refused       cowMap[ForkID, bool]
	children      cowMap[ForkID, []ForkID] // slices never written in place: appended to a copy
	path          cowMap[ForkID, []WorkerID]
	exempt        cowMap[ForkID, bool]
	exemptRRef    cowMap[RRefID, bool]
	remoteArrived cowMap[RRefID, bool]
	owners        cowMap[RRefID, WorkerID]
	crashed       bool
	sum           digest // of the facts the state key covers (sums.go)
}

func newMonitor() *monitor { return &monitor{} }

// clone shares every map with m, each copied on its first write (cowMap):
// a step writes one fact or two. m itself is not written after a clone
// (worlds share it read-only, see mw), so only the copy's maps are marked.
func (m *monitor) clone() *monitor {
	n := *m
	n.values.share()
	n.failing.share()
	n.deletes.share()
	n.answered.share()
	n.refused.share()
	n.children.share()
	n.path.share()
	n.exempt.share()
	n.exemptRRef.share()
	n.remoteArrived.share()
	n.owners.share()
	return &n
}

// runState is the program's side of a run: its handles and fetches, the
// calls whose answer binds a handle, and what travels.
type runState struct {
	// Records are never written once in a map (a change replaces the
	// record): the maps are shared with clones and copied on write.
	handles  cowMap[handleKey, *progHandle]
	fetches  cowMap[handleKey, *fetchState]
	fetchIDs cowMap[[2]uint64, *fetchState] // (worker, fetch id) -> the fetch, until answered
	returns  cowMap[[2]uint64, string]      // (caller, call id) -> name of the returned handle
	travel   cowMap[ForkID, travelling]     // passed or returned handles not yet bound
	dups     []dupRule                      // never changed in place: a change makes a new slice
	sum      digest                         // of the facts the state key covers (sums.go)
}

func newRunState() *runState { return &runState{} }

// clone shares every map with p, each copied on its first write; p itself
// is not written after a clone (worlds share it read-only, see pw).
func (p *runState) clone() *runState {
	n := *p
	n.handles.share()
	n.fetches.share()
	n.fetchIDs.share()
	n.returns.share()
	n.travel.share()
	return &n
}

// pw is the program's state, to change: copied first if a clone shares it.
func (w *world) pw() *runState {
	if !w.pOwned {
		w.p, w.pOwned = w.p.clone(), true
	}
	return w.p
}

// mw is the monitor, to change: copied first if a clone shares it.
func (w *world) mw() *monitor {
	if !w.monOwned {
		w.mon, w.monOwned = w.mon.clone(), true
	}
	return w.mon
}

// CoreFactory makes the core of one worker; tests substitute mutated cores.
type CoreFactory func(self WorkerID) *core.Core

// SeededCore is the production core with ids from a fixed seed per worker
// (core.WithIDSeed), so that runs, their state hashes and -replay strings
// are the same on every machine.
func SeededCore(self WorkerID) *core.Core {
	var seed [32]byte
	copy(seed[:], "rref conformance ids")
	binary.LittleEndian.PutUint32(seed[28:], uint32(self))
	return core.New(self, core.WithIDSeed(seed), core.WithDeferredAcks())
}

// slot is one worker's part of a world.
type slot struct {
	held *heldCore // shared with clones until written (see world.core)
	dead bool
	// key caches the core's state digest (zero: not known). A clone shares
	// the digests of the cores it shares; world.core drops one when its
	// core may change.
	key digest
}

// world is one state of a scenario's run: every worker's core, the network,
// the program's progress and the monitors.
type world struct {
	sc        *Scenario
	ids       map[string]WorkerID
	slots     []slot // index id-1: one per worker, in one slice for one copy a clone
	inflight  []inFlight
	prog      scenario.Program
	returning bool // a return command waits for its callee to answer
	// p and mon are shared with clones until written, as cores are: read
	// them through the fields, write them through pw and mw.
	p         *runState
	pOwned    bool
	mon       *monitor
	monOwned  bool
	violation *Violation
	// unreduced turns the reduction below off (Options.Unreduced).
	// eager holds, within one step, the calls whose CallRet is delivered
	// the moment it is sent: the answer to a pass carries nothing, no
	// command waits for it, and its delivery changes nothing but the
	// caller's record of the call, so it commutes with every other step
	// and exploring its every order only multiplies states. Empty between
	// steps.
	unreduced bool
	eager     [][2]uint64 // (caller, call id); a handful at most
	// noDeliveryCache turns world.deliver's cache off (Options, for the
	// differential test).
	noDeliveryCache bool
	// checkDeliveries runs every delivery taken from the cache afresh too,
	// and notes the first that differs (spares.mismatch), for the tests.
	checkDeliveries bool
	// fresh makes AppendState encode everything anew, caches ignored, for
	// the clone check (Options.checkClones).
	fresh bool
	// scratch is where parts are encoded before their digests are taken,
	// shared by a world's clones: one search's worlds are stepped by one
	// goroutine, one at a time.
	scratch *[]byte
	// fp records what the last step read and wrote, for the search's sleep
	// sets (explore.Commuter). Shared by a world's clones, as scratch is:
	// the search copies it after each step, before the next.
	fp *explore.Footprint
	// facts are the monitor's counted facts (counters.go): the functions
	// run and what the cores' counters count. They live in the world, in
	// factRoom while they fit, so that a clone copies them with itself
	// and a step changes them in place; factSum is their sum, in the key.
	facts    []fact
	factSum  digest
	factRoom [inlineFacts]fact
	// changed holds the workers whose cores the current step changed, a
	// bit each (touch), for the check of their counters.
	changed uint64
	// commutes caches Commutes' answers for a core factory of the caller's
	// (nil: the production core's, in commuteCache), shared the same way.
	commutes *map[commuteKey]bool
	// spare holds the worlds and cores the search is done with, for the
	// next clones to reuse (explore.Recycler); shared the same way.
	spare *spares
	// slotRoom and inflightRoom hold slots and inflight while they fit, so
	// that a clone is one allocation: the search clones a world for nearly
	// every step, and a scenario has a few workers and messages.
	slotRoom     [inlineSlots]slot
	inflightRoom [inlineInflight]inFlight
	choiceRoom   [inlineInflight + 1]int
}

// inlineSlots and inlineInflight are the workers and messages in flight a
// world holds within itself: the corpus's largest scenarios have seven
// workers, and rarely more than eight messages in flight.
const (
	inlineSlots    = 8
	inlineInflight = 8
	// inlineFacts: a run of the corpus's or the enumeration's programs
	// rarely counts more (runs, calls out, users waiting, children lent);
	// the six-user chain's, at 12, spilled onto the heap on most clones.
	inlineFacts = 16
)

func newWorld(sc *Scenario, factory CoreFactory, unreduced bool) *world {
	w := &world{sc: sc, prog: scenario.NewProgram(sc), ids: map[string]WorkerID{}, p: newRunState(), pOwned: true,
		mon: newMonitor(), monOwned: true, unreduced: unreduced, scratch: new([]byte), fp: new(explore.Footprint),
		spare: new(spares)}
	if factory == nil {
		factory = SeededCore
	} else {
		own := map[commuteKey]bool{} // another core: the shared answers do not hold for it
		w.commutes = &own
	}
	for i, name := range sc.Workers {
		id := WorkerID(i + 1)
		w.ids[name] = id
		w.slots = append(w.slots, slot{held: &heldCore{core: factory(id), refs: 1}})
	}
	return w
}

// heldCore is a core and how many worlds hold it: a world changes a core
// in place only when it alone holds it (world.core), and the last to let
// go of one gives it to the spares. A count too high is safe (a core is
// copied that needed not be), one too low is not: the search recycles
// each copy it made once (explore.Recycler), and a world no one recycles
// only keeps its cores from the spares.
type heldCore struct {
	core *core.Core
	refs int
	// counters are core's counters once counted (counted): a core no
	// world changes, such as one the cache of deliveries holds, is
	// counted once however many steps lead to it (checkCounters).
	counters core.Counters
	counted  bool
}

// spares are the worlds and cores a search is done with, for the next
// clones to reuse. They are at most as many as the search's path is deep:
// each frame of it recycles one world.
type spares struct {
	worlds []*world
	cores  []*heldCore
	// delivered remembers deliveries (world.deliver), each holding its
	// resulting core.
	delivered map[deliveryKey]*delivery
	hits      int // deliveries taken from it, for the tests
	// mismatch is the first delivery taken from the cache that differed
	// from the delivery run afresh (world.checkDeliveries).
	mismatch string
}

// deliveryKey is a delivery: the receiving core's digest and the
// message's (its sender, receiver and bytes).
type deliveryKey struct{ core, msg digest }

// handTo gives m to c, its receiver's core: a message, the notice of its
// sender's death, or its timer for a held-back RemoteRet.
func (m inFlight) handTo(c *core.Core) {
	switch {
	case m.notice:
		c.PeerFailed(m.from)
	case m.flush:
		c.FlushAck(m.ack)
	default:
		c.Deliver(m.from, m.msg)
	}
}

// recheck runs delivery m on a copy of its receiver's core and says how
// the result differs from d, the cached one ("" when it does not).
func (w *world) recheck(m inFlight, d *delivery) string {
	c := w.slots[m.to-1].held.core.Clone()
	m.handTo(c)
	r := c.TakeReady()
	var fresh, cached []byte
	for _, e := range r.Messages {
		fresh = rref.AppendFrame(strconv.AppendUint(fresh, uint64(e.To), 10), e.Msg)
	}
	for _, e := range d.ready.Messages {
		cached = rref.AppendFrame(strconv.AppendUint(cached, uint64(e.To), 10), e.Msg)
	}
	fresh = fmt.Appendf(fresh, "%+v %+v %+v %+v %+v %v %v", r.Runs, r.Fetches, r.Calls, r.Cancels, r.Freed, r.Errors, r.DeferredAcks)
	cached = fmt.Appendf(cached, "%+v %+v %+v %+v %+v %v %v", d.ready.Runs, d.ready.Fetches, d.ready.Calls, d.ready.Cancels, d.ready.Freed, d.ready.Errors, d.ready.DeferredAcks)
	if c.RecomputeStateDigest() != d.held.core.RecomputeStateDigest() || !bytes.Equal(fresh, cached) {
		what := m.String()
		if m.isMessage() {
			what = core.FormatMessage(m.msg)
		}
		return fmt.Sprintf("delivering %s from %s to %s: afresh the core became\n%s\nand produced %+v;\nthe cache holds\n%s\nand %+v",
			what, w.name(m.from), w.name(m.to), c.Dump(), r, d.held.core.Dump(), d.ready)
	}
	return ""
}

// delivery is what a delivery made: the receiver's new core, held by the
// cache, and what the core produced.
type delivery struct {
	held  *heldCore
	key   digest // the digest of held's core, which no one changes
	ready core.Ready
}

// deliveriesMax bounds the remembered deliveries: past it they are
// dropped and remembered afresh. At about 2 KB each, including the tables
// only they hold, the bound is some 30 MB.
const deliveriesMax = 1 << 14

// remember keeps what delivery k made: h's core (held from now on by the
// cache too, so that no world changes it in place) and its outputs r.
func (sp *spares) remember(k deliveryKey, h *heldCore, r core.Ready) {
	if len(sp.delivered) >= deliveriesMax {
		for _, d := range sp.delivered {
			sp.drop(d.held)
		}
		clear(sp.delivered)
	}
	if sp.delivered == nil {
		sp.delivered = map[deliveryKey]*delivery{}
	}
	h.refs++
	sp.delivered[k] = &delivery{held: h, key: digest(h.core.StateDigest()), ready: r}
}

// drop lets go of one hold on h: the last one gives it to the spares.
func (sp *spares) drop(h *heldCore) {
	if h.refs--; h.refs == 0 {
		sp.cores = append(sp.cores, h)
	}
}

// hold makes d's core worker id's core in w.
func (w *world) hold(id WorkerID, d *delivery) {
	w.touch(id)
	s := &w.slots[id-1]
	if s.held != d.held {
		w.spare.drop(s.held)
		d.held.refs++
		s.held = d.held
	}
	s.key = d.key
}

// clone is a copy of c, held once, made in a spare core when there is one.
func (sp *spares) clone(c *core.Core) *heldCore {
	if sp != nil {
		if k := len(sp.cores); k > 0 {
			h := sp.cores[k-1]
			sp.cores = sp.cores[:k-1]
			h.core, h.refs, h.counted = c.CloneInto(h.core), 1, false
			return h
		}
	}
	return &heldCore{core: c.Clone(), refs: 1}
}

// world is a world to overwrite with a clone: a spare, or a new one.
func (sp *spares) world() *world {
	if sp != nil {
		if k := len(sp.worlds); k > 0 {
			w := sp.worlds[k-1]
			sp.worlds = sp.worlds[:k-1]
			return w
		}
	}
	return new(world)
}

// Recycle gives w, which the search is done with, to the clones to come,
// with the cores no other world holds (explore.Recycler). The tables in
// a core may still be shared with other cores, and stay untouched.
func (w *world) Recycle() {
	if w.spare == nil {
		return
	}
	for i := range w.slots {
		w.spare.drop(w.slots[i].held)
	}
	w.spare.worlds = append(w.spare.worlds, w)
}

// Clone returns an independent copy.
func (w *world) Clone() *world {
	n := w.spare.world()
	*n = *w
	// Copy on write: a step changes one core or two, so the clone shares
	// them all and copies each only when it first changes it (core).
	n.slots = inline(n.slotRoom[:], w.slots)
	for i := range w.slots {
		w.slots[i].held.refs++
	}
	n.inflight = inline(n.inflightRoom[:], w.inflight)
	n.facts = inline(n.factRoom[:], w.facts)
	// The program's state and the monitor are shared the same way.
	n.pOwned, w.pOwned = false, false
	n.monOwned, w.monOwned = false, false
	n.eager = nil // empty between steps; made when a step needs it
	return n
}

// inline copies s into room when it fits (room is the clone's own, copied
// with it), onto the heap when not.
func inline[T any](room, s []T) []T {
	if len(s) > len(room) {
		return slices.Clone(s)
	}
	return room[:copy(room, s):len(room)]
}

func (w *world) name(id WorkerID) string { return w.sc.Workers[id-1] }

// core is worker id's core, to change: copied first if a clone shares it.
func (w *world) core(id WorkerID) *core.Core {
	w.write(tableCore, uint64(id))
	w.touch(id)
	s := &w.slots[id-1]
	if s.held.refs > 1 {
		s.held.refs--
		s.held = w.spare.clone(s.held.core)
	}
	s.key = digest{}
	s.held.counted = false // it changes now
	return s.held.core
}

// peek is worker id's core, only to read.
func (w *world) peek(id WorkerID) *core.Core {
	w.read(tableCore, uint64(id))
	return w.slots[id-1].held.core
}

func (w *world) fail(inv string, line int, format string, args ...any) {
	if w.violation == nil {
		w.violation = &Violation{Invariant: inv, Line: line, Detail: fmt.Sprintf(format, args...)}
	}
}

// Violation returns the first violation found, if any.
func (w *world) Violation() *Violation { return w.violation }

// Finished reports whether every command ran and nothing is in flight.
func (w *world) Finished() bool { return w.prog.Done() && len(w.inflight) == 0 }

// Choices lists what may happen next: -1 runs the next command, i >= 0
// delivers in-flight message i. Identical messages are offered once.
func (w *world) Choices() []int {
	out := w.choiceRoom[:0] // the engine copies it (explore.Model.Choices)
	if w.prog.Ready(w) {
		out = append(out, -1)
	}
	// A linear search: a handful of messages are in flight, and a map
	// per state cost more than the comparisons.
	for i, m := range w.inflight {
		if !slices.ContainsFunc(w.inflight[:i], func(e inFlight) bool { return e.digest == m.digest }) {
			out = append(out, i)
		}
	}
	return out
}

// Describe says what choice c does, for traces.
func (w *world) Describe(c int) string {
	if c < 0 {
		cmd := w.prog.Next()
		return fmt.Sprintf("line %d: %s", cmd.Line, cmd.Text)
	}
	m := w.inflight[c]
	if m.notice {
		return fmt.Sprintf("deliver to %s: %s failed", w.name(m.to), w.name(m.from))
	}
	if m.flush {
		return fmt.Sprintf("on %s: the timer for the RemoteRet held back for %d:%d fires", w.name(m.to), m.ack.Worker, m.ack.Local)
	}
	return fmt.Sprintf("deliver %s->%s %s", w.name(m.from), w.name(m.to), core.FormatMessage(m.msg))
}

// ChoiceKey names the event behind choice c alike in every state: the
// next command, or a message by its sender, receiver and bytes.
func (w *world) ChoiceKey(c int) string {
	if c < 0 {
		return "cmd"
	}
	d := w.inflight[c].digest
	return string(d.append(make([]byte, 0, 16)))
}

// Step applies choice c.
func (w *world) Step(c int) {
	w.changed = 0
	w.step(c)
	if w.violation == nil {
		w.checkCounters()
	}
	for i := range w.slots {
		if w.slots[i].held.core.Forgotten() > 0 {
			w.fail(InvariantStateKey, 0, "worker %s's bounded memory (freed values, deleted forks or early cancels) is full and forgot an entry: "+
				"the state key leaves out the order it forgets in, so merged states could differ from here on; explore a smaller scenario", w.sc.Workers[i])
		}
	}
}

// InvariantStateKey is the violation a search reports when a core's state
// key no longer tells its states apart (core.Core.Forgotten): not a
// protocol bug, but the end of what the search can prove.
const InvariantStateKey = "state-key"

func (w *world) step(c int) {
	w.fp.Reset()
	if c < 0 {
		// What made the command ready is read by it too: a step that
		// changes it does not commute with the command.
		w.prog.Ready(w)
		w.write(tableProgram, 0)
		if v := w.prog.Step(w); v != nil && w.violation == nil {
			w.violation = v
		}
		return
	}
	m := w.inflight[c]
	w.inflight = slices.Delete(w.inflight, c, c+1)
	w.fp.Add(tableInflight)
	if w.slots[m.to-1].dead {
		return
	}
	if rc, ok := m.msg.(*rref.RemoteCall); ok && m.isMessage() {
		w.mw().remoteArrived.set(rc.RRef, true)
		w.set(tableRemoteArrived, rrefKey(rc.RRef))
	}
	w.received(m)
	w.deliver(m)
	w.drain(m.to)
}

// deliver hands m to its receiver's core and processes what the core
// produced. The core is a function of its state and its input, so the
// result of a delivery is remembered by the core's digest and the
// message's (deliveries), and a search that delivers the same message to
// the same core state again, in another state of the rest of the world,
// takes the remembered core (shared, copied on its next write) and
// processes the remembered outputs instead.
func (w *world) deliver(m inFlight) {
	s := &w.slots[m.to-1]
	var key deliveryKey
	cache := w.spare != nil && !w.noDeliveryCache
	if cache {
		if s.key == (digest{}) {
			s.key = digest(s.held.core.StateDigest())
		}
		key = deliveryKey{core: s.key, msg: m.digest}
		if d, ok := w.spare.delivered[key]; ok {
			if w.checkDeliveries && w.spare.mismatch == "" {
				w.spare.mismatch = w.recheck(m, d)
			}
			w.spare.hits++
			w.write(tableCore, uint64(m.to)) // as world.core records
			w.hold(m.to, d)
			w.process(m.to, d.ready)
			return
		}
	}
	cr := w.core(m.to)
	m.handTo(cr)
	r := cr.TakeReady()
	if cache {
		w.spare.remember(key, s.held, r)
	}
	w.process(m.to, r)
}

func valueBytes(v int64) []byte { return []byte(strconv.FormatInt(v, 10)) }

func (w *world) bind(k handleKey, h core.HandleID) {
	st := w.peek(k.w).Handle(h)
	ph := &progHandle{id: h, rref: st.RRef, fork: st.Fork, onOwner: st.IsOwner}
	if st.IsOwner {
		ph.fork = ForkID{}
	}
	w.pw().setHandle(k, ph)
	w.write(tableHandles, handleLoc(k))
}

// The commands' effects: world is a scenario.Target.

func (w *world) key(wn, x string) handleKey { return handleKey{w.ids[wn], x} }

func (w *world) New(wn, x string, v int64) error {
	wid := w.ids[wn]
	h := w.core(wid).NewLocal(valueBytes(v))
	w.bind(handleKey{wid, x}, h)
	id := w.p.handles.m[handleKey{wid, x}].rref
	w.mw().values.set(id, v)
	w.write(tableValues, rrefKey(id))
	w.drain(wid)
	return nil
}

func (w *world) Remote(wn, owner, x string, v int64, fail bool) error {
	wid := w.ids[wn]
	fn := "identity"
	if fail {
		fn = "fail"
	}
	h, err := w.core(wid).Remote(w.ids[owner], fn, valueBytes(v), nil)
	if err != nil {
		return err
	}
	k := handleKey{wid, x}
	w.bind(k, h)
	id := w.p.handles.m[k].rref
	mon := w.mw()
	mon.owners.set(id, w.ids[owner])
	w.set(tableOwners, rrefKey(id))
	if fail {
		mon.failing.set(id, true)
		w.write(tableFailing, rrefKey(id))
	} else {
		mon.values.set(id, v)
		w.write(tableValues, rrefKey(id))
	}
	w.drain(wid)
	return nil
}

func (w *world) Pass(wn, to, x, y string) error {
	wid := w.ids[wn]
	h := w.p.handles.m[handleKey{wid, x}]
	w.read(tableHandles, handleLoc(handleKey{wid, x}))
	if _, err := w.core(wid).Call(w.ids[to], "__pass", []byte(y), []core.HandleID{h.id}); err != nil {
		return err
	}
	w.drain(wid)
	return nil
}

func (w *world) Return(wn, caller, x, y string) error {
	cid := w.ids[caller]
	id, err := w.core(cid).Call(w.ids[wn], "__return", []byte(x), nil)
	if err != nil {
		return err
	}
	w.pw().returns.set([2]uint64{uint64(cid), id}, y)
	w.write(tableReturns, pairKey([2]uint64{uint64(cid), id}))
	w.returning = true
	w.write(tableReturning, 0)
	w.drain(cid)
	return nil
}

func (w *world) Fetch(wn, x string) error {
	wid := w.ids[wn]
	k := handleKey{wid, x}
	h := w.p.handles.m[k]
	w.read(tableHandles, handleLoc(k))
	w.read(tableValues, rrefKey(h.rref))
	w.read(tableFailing, rrefKey(h.rref))
	f := &fetchState{liveAtIssue: !h.released, timedOut: h.timedOut, issued: *h}
	f.issued.key = k
	if want, ok := w.mon.values.m[h.rref]; ok {
		f.holds = scenario.Holding{Known: true, Value: string(valueBytes(want))}
	} else if w.mon.failing.m[h.rref] {
		f.holds = scenario.Holding{Known: true, Fail: true}
	}
	id := h.id
	if h.released {
		id = 0 // a released handle: the core answers deleted at once
	}
	w.pw().setFetch(k, f)
	w.write(tableFetches, handleLoc(k))
	fid := w.core(wid).Fetch(id)
	w.pw().fetchIDs.set([2]uint64{uint64(wid), fid}, f)
	w.write(tableFetchIDs, pairKey([2]uint64{uint64(wid), fid}))
	w.drain(wid)
	return nil
}

func (w *world) Release(wn, x string) error {
	wid := w.ids[wn]
	h := w.p.handles.m[handleKey{wid, x}]
	w.write(tableHandles, handleLoc(handleKey{wid, x}))
	if !h.released {
		released := *h // a new record: clones share the old one
		released.released = true
		w.pw().setHandle(handleKey{wid, x}, &released)
		if err := w.core(wid).Release(h.id); err != nil {
			w.fail(rref.InvariantS5, 0, "%s's release of %s refused: %v", wn, x, err)
		}
	}
	w.drain(wid)
	return nil
}

func (w *world) Timeout(wn, x string) error {
	wid := w.ids[wn]
	w.write(tableHandles, handleLoc(handleKey{wid, x}))
	timed := *w.p.handles.m[handleKey{wid, x}] // a new record: clones share the old one
	timed.timedOut = true
	h := &timed
	w.pw().setHandle(handleKey{wid, x}, h)
	if !h.onOwner {
		w.core(wid).Timeout(h.id)
	}
	w.drain(wid)
	return nil
}

// Advance ticks the clock of worker wn (of every live worker when wn is
// "") ticks times. The only thing a core does on time is give up a value
// whose RemoteCall has not arrived after core.DefaultPendingTicks: such a
// value never exists now, and the monitor exempts it as it does a value
// whose creator died before its RemoteCall arrived (S1, S4).
func (w *world) Advance(wn string, ticks int64) error {
	w.fp.Everything() // it may change any core, and what the checks read of it
	for i := range w.slots {
		id := WorkerID(i + 1)
		if w.slots[i].dead || wn != "" && w.ids[wn] != id {
			continue
		}
		awaited := w.awaitedOn(id)
		cr := w.core(id)
		for range ticks {
			cr.Tick()
		}
		if len(awaited) > 0 {
			held := w.awaitedOn(id)
			for _, v := range awaited {
				if !slices.Contains(held, v) {
					w.mw().markExemptRRef(v) // given up: it will never exist
				}
			}
		}
		w.drain(id)
	}
	return nil
}

// awaitedOn lists the values worker id keeps a record of whose RemoteCall
// has not arrived (those its clock may give up), in its core's order.
func (w *world) awaitedOn(id WorkerID) []RRefID {
	var out []RRefID
	for _, h := range w.slots[id-1].held.core.Held() {
		if h.Kind == core.HeldValue && h.RRef.Worker != id && !w.mon.remoteArrived.m[h.RRef] {
			out = append(out, h.RRef)
		}
	}
	return out
}

func (w *world) Crash(wn string) error {
	w.fp.Everything() // it drops messages, and changes what every check reads
	w.crash(w.ids[wn])
	return nil
}

func (w *world) Duplicate(from, to, kind string) error {
	w.fp.Everything() // every later send reads the duplications
	w.pw().dups = append(slices.Clip(w.p.dups), dupRule{from: w.ids[from], to: w.ids[to], kind: kind})
	return nil
}

// Settle does nothing: the program waits until nothing is in flight.
func (w *world) Settle() error { return nil }

// What the program waits on and checks.

func (w *world) Alive(wn string) bool { return !w.slots[w.ids[wn]-1].dead }

func (w *world) Holds(wn, x string) bool {
	w.read(tableHandles, handleLoc(w.key(wn, x)))
	return w.p.handles.m[w.key(wn, x)] != nil
}

func (w *world) Quiet() bool {
	w.fp.ReadTable(tableInflight)
	return len(w.inflight) == 0
}

func (w *world) Busy() string {
	w.read(tableReturning, 0)
	if w.returning {
		return "its callee has not answered"
	}
	return ""
}

func (w *world) Fetched(wn, x string) scenario.Fetched {
	w.read(tableFetches, handleLoc(w.key(wn, x)))
	f := w.p.fetches.m[w.key(wn, x)]
	if f == nil {
		return scenario.Fetched{}
	}
	out := scenario.Fetched{Issued: true, Done: f.done, Holds: f.holds}
	if f.done {
		if f.err == rref.ErrorKindNone {
			out.Value = string(f.value)
		} else {
			out.Kind = kindName(f.err)
		}
	}
	return out
}

func (w *world) Counters(wn string) (scenario.Counters, error) {
	n := w.peek(w.ids[wn]).Counters()
	return scenario.Counters{Owners: n.Owners, Forks: n.Forks, PendingUsers: n.PendingUsers, PendingChildren: n.PendingChildren}, nil
}

func (w *world) Unclean() string {
	w.fp.ReadTable(tableCore)
	for i := range w.slots {
		cr := w.slots[i].held.core
		if w.slots[i].dead {
			continue
		}
		if n := cr.Counters(); !n.Clean() {
			return fmt.Sprintf("%s is not clean: owners=%d forks=%d pending_users=%d pending_children=%d\n%s",
				w.sc.Workers[i], n.Owners, n.Forks, n.PendingUsers, n.PendingChildren, cr.Dump())
		}
	}
	return ""
}

func (w *world) crash(x WorkerID) {
	if w.slots[x-1].dead {
		return
	}
	w.slots[x-1].dead = true
	mon := w.mw()
	mon.markCrashed()
	w.forgetDead(x)
	kept := w.inflight[:0]
	for _, m := range w.inflight {
		if m.from != x && m.to != x {
			kept = append(kept, m)
		}
	}
	w.inflight = kept
	// Exemptions of S1: forks still unanswered below the dead worker, and values
	// whose creator died before its RemoteCall reached the owner.
	for f, p := range mon.path.m {
		if !mon.answered.m[f] && slices.Contains(p, x) {
			mon.mark(&mon.exempt, factExempt, f)
		}
	}
	for _, h := range w.p.handles.m {
		if h.rref.Worker == x && !mon.remoteArrived.m[h.rref] {
			mon.markExemptRRef(h.rref)
		}
	}
	for i := range w.slots {
		if to := WorkerID(i + 1); to != x && !w.slots[i].dead {
			w.push(inFlight{from: x, to: to, notice: true})
		}
	}
}

func (w *world) push(m inFlight) {
	key := (*w.scratch)[:0]
	key = strconv.AppendUint(key, uint64(m.from), 10)
	key = append(key, '>')
	key = strconv.AppendUint(key, uint64(m.to), 10)
	key = append(key, ':')
	switch {
	case m.notice:
		key = append(key, "notice"...)
	case m.flush:
		key = append(key, "flush"...)
		key = rref.AppendRRefID(key, &m.ack)
	default:
		key = rref.AppendFrame(key, m.msg)
	}
	m.digest = digestOf(key)
	*w.scratch = key
	w.inflight = append(w.inflight, m)
	w.fp.Add(tableInflight)
	if !m.isMessage() {
		return
	}
	w.read(tableDups, 0)
	for i, d := range w.p.dups {
		if d.from == m.from && d.to == m.to && d.kind == m.msg.MessageCode().String() {
			w.write(tableDups, 0)
			p := w.pw()
			p.dups = slices.Delete(slices.Clone(p.dups), i, i+1)
			w.inflight = append(w.inflight, m) // the resend
			return
		}
	}
}

func kindName(k rref.ErrorKind) string {
	if k == rref.ErrorKindOwnerFailed {
		return "owner-failed"
	}
	return k.String()
}

// drain takes a core's outputs, plays the program's part (running functions,
// binding handles, recording fetches) and feeds the monitors, until quiet.
func (w *world) drain(id WorkerID) {
	// The core is written (its outputs are taken), copied only when it has
	// some: a clone that shares it and has nothing to take copies nothing.
	w.write(tableCore, uint64(id))
	for w.slots[id-1].held.core.HasReady() {
		w.process(id, w.core(id).TakeReady())
	}
}

// process acts on what worker id's core produced. r is only read: a
// cached delivery's outputs are processed again in other worlds.
func (w *world) process(id WorkerID, r core.Ready) {
	for _, err := range r.Errors {
		w.fail(rref.InvariantS5, 0, "worker %s: %v", w.name(id), err)
	}
	for _, m := range r.Messages {
		w.observe(id, m)
		ret, isRet := m.Msg.(*rref.CallRet)
		eager := isRet && w.takeEager(m.To, ret.CallID, id)
		if w.slots[m.To-1].dead {
			continue
		}
		if eager {
			w.received(inFlight{from: id, to: m.To, msg: m.Msg})
			w.core(m.To).Deliver(id, m.Msg)
			w.drain(m.To)
			continue
		}
		w.push(inFlight{from: id, to: m.To, msg: m.Msg})
	}
	for _, ack := range r.DeferredAcks {
		w.push(inFlight{from: id, to: id, flush: true, ack: ack})
	}
	for _, fr := range r.Freed {
		w.checkFreed(id, fr.RRef)
	}
	for _, run := range r.Runs {
		w.run(id, run)
	}
	for _, fr := range r.Fetches {
		w.fetched(id, fr)
	}
	for _, cres := range r.Calls {
		y, ok := w.p.returns.m[[2]uint64{uint64(id), cres.CallID}]
		if !ok {
			w.read(tableReturns, pairKey([2]uint64{uint64(id), cres.CallID}))
			continue
		}
		w.pw().returns.del([2]uint64{uint64(id), cres.CallID})
		w.write(tableReturns, pairKey([2]uint64{uint64(id), cres.CallID}))
		if len(cres.Handles) == 1 {
			w.bindTravelled(handleKey{id, y}, cres.Handles[0])
		}
	}
}

// takeEager reports whether the CallRet of call id, from worker from to
// caller, is one to deliver at once (see world.eager), and forgets it. A
// scenario that duplicates CallRets from that worker explores it as any
// message instead.
func (w *world) takeEager(caller WorkerID, id uint64, from WorkerID) bool {
	k := [2]uint64{uint64(caller), id}
	i := slices.Index(w.eager, k)
	if i < 0 {
		return false
	}
	w.eager = slices.Delete(w.eager, i, i+1)
	w.read(tableDups, 0)
	for _, d := range w.p.dups {
		if d.from == from && d.to == caller && d.kind == rref.CodeCallRet.String() {
			return false
		}
	}
	return true
}

func (w *world) bindTravelled(k handleKey, h core.HandleID) {
	w.bind(k, h)
	st := w.peek(k.w).Handle(h)
	w.fp.ReadTable(tableTravel)
	for f, t := range w.p.travel.m {
		if t.to == k.w && t.name == k.name && t.rref == st.RRef {
			w.pw().delTravel(f)
			w.write(tableTravel, forkKey(f))
		}
	}
}

func (w *world) run(id WorkerID, run core.Run) {
	cr := w.core(id)
	w.countRun(id, run)
	switch {
	case run.Kind == core.RunRemote:
		fail := core.Failure{}
		value := run.Args
		if run.Fn == "fail" {
			fail, value = core.Failure{Kind: rref.ErrorKindUser, Message: "scenario function failed"}, nil
		}
		if err := cr.CompleteRemote(run.RRef, value, fail); err != nil {
			w.fail(InvariantOnce, 0, "%s could not store what its function made: %v", w.name(id), err)
		}
	case run.Fn == "__pass":
		if len(run.Handles) == 1 {
			w.bindTravelled(handleKey{id, string(run.Args)}, run.Handles[0])
		}
		if !w.unreduced {
			w.eager = append(w.eager, [2]uint64{uint64(run.From), run.CallID})
		}
		cr.Return(run.From, run.CallID, nil, nil, core.Failure{})
	case run.Fn == "__return":
		h := w.p.handles.m[handleKey{id, string(run.Args)}]
		w.read(tableHandles, handleLoc(handleKey{id, string(run.Args)}))
		var refs []core.HandleID
		if h != nil && !h.released {
			refs = []core.HandleID{h.id}
		}
		if err := cr.Return(run.From, run.CallID, nil, refs, core.Failure{}); err != nil {
			w.fail(rref.InvariantL1, 0, "return of %s refused: %v", string(run.Args), err)
		}
		w.returning = false
		w.write(tableReturning, 0)
	default:
		cr.Return(run.From, run.CallID, nil, nil, core.Failure{Kind: rref.ErrorKindUnknownFunction, Message: run.Fn})
	}
}

// countRun is the check that every function runs once: a remote's per
// value, a call's per call (its caller and call id).
func (w *world) countRun(id WorkerID, run core.Run) {
	k := fact{kind: factRanCall, key: [2]uint64{uint64(run.From), run.CallID}, a: id}
	what := fmt.Sprintf("call %d from %s", run.CallID, w.name(run.From))
	if run.Kind == core.RunRemote {
		k = fact{kind: factRan, key: [2]uint64{uint64(run.RRef.Worker), run.RRef.Local}, a: id}
		what = fmt.Sprintf("the remote that makes %d:%d", run.RRef.Worker, run.RRef.Local)
	}
	w.write(tableRuns, pairKey(k.key)^uint64(k.kind))
	if w.findFact(k.kind, k.key) >= 0 {
		w.fail(InvariantOnce, 0, "%s ran the function of %s a second time", w.name(id), what)
		return
	}
	w.addFact(k)
}

// InvariantOnce is the violation of a function run twice, or of a run
// whose result the core would not take: the protocol runs each remote's
// and each call's function once (a resent RemoteCall is ignored; a Call is
// not resent).
const InvariantOnce = "once"

func (w *world) fetched(id WorkerID, fr core.FetchResult) {
	fid := [2]uint64{uint64(id), fr.FetchID}
	w.write(tableFetchIDs, pairKey(fid))
	if _, ok := w.p.fetchIDs.m[fid]; !ok {
		return
	}
	p := w.pw()
	answered := *p.fetchIDs.m[fid] // a new record: clones share the old one
	f := &answered
	w.write(tableFetches, handleLoc(f.issued.key))
	f.done, f.value, f.err = true, fr.Value, fr.Err
	if p.fetches.m[f.issued.key] == p.fetchIDs.m[fid] {
		p.setFetch(f.issued.key, f) // still the name's last fetch
	}
	p.fetchIDs.del(fid)
	h := &f.issued // checked against the handle it was issued on, not the name's binding now
	// The checks below read these facts (and others only a crash changes).
	w.read(tableValues, rrefKey(h.rref))
	w.read(tableFailing, rrefKey(h.rref))
	w.read(tableExempt, forkKey(h.fork))
	w.read(tableRefused, forkKey(h.fork))
	where := fmt.Sprintf("%s's fetch of %s", w.name(id), h.key.name)
	switch fr.Err {
	case rref.ErrorKindNone:
		want, known := w.mon.values.m[h.rref]
		if !known || string(fr.Value) != string(valueBytes(want)) {
			w.fail(rref.InvariantS4, 0, "%s returned %q, not the value", where, fr.Value)
		}
	case rref.ErrorKindUser:
		if !w.mon.failing.m[h.rref] {
			w.fail(rref.InvariantS4, 0, "%s failed with a user error, but the function succeeded", where)
		}
	case rref.ErrorKindDeleted:
		if f.liveAtIssue {
			w.fail(rref.InvariantS4, 0, "%s failed with deleted on a live handle", where)
		}
	case rref.ErrorKindLost:
		// Only a handle a crash may have cut off (S1's exceptions), or one
		// the owner refused, may be lost; a crash elsewhere excuses nothing.
		mon := w.mon
		cut := mon.exempt.m[h.fork] && h.fork != (ForkID{}) || mon.exemptRRef.m[h.rref] || mon.refused.m[h.fork] && mon.crashed
		if f.liveAtIssue && !cut {
			if !mon.crashed {
				w.fail(rref.InvariantS4, 0, "%s failed with lost in a run without a crash", where)
			} else {
				w.fail(rref.InvariantS4, 0, "%s failed with lost, but no crash cut it off", where)
			}
		}
	case rref.ErrorKindOwnerFailed:
		if !w.slots[h.rref.Worker-1].dead && !w.ownerDead(h) {
			w.fail(rref.InvariantS4, 0, "%s failed with owner-failed, but the owner lives", where)
		}
	case rref.ErrorKindTimeout:
		if !f.timedOut {
			w.fail(rref.InvariantS4, 0, "%s timed out, but no timeout was set", where)
		}
	default:
		w.fail(rref.InvariantS4, 0, "%s failed with %s", where, fr.Err)
	}
}

func (w *world) ownerDead(h *progHandle) bool {
	o := w.ownerOf(h.rref)
	return o != 0 && w.slots[o-1].dead
}

// ownerOf is the owner of id as the monitor saw it (the callee of the remote
// that created it, or its creator for a local value).
func (w *world) ownerOf(id RRefID) WorkerID {
	w.read(tableOwners, rrefKey(id))
	if o, ok := w.mon.owners.m[id]; ok {
		return o
	}
	return id.Worker
}

// observe feeds the monitors with a message a worker emits.
func (w *world) observe(from WorkerID, e core.Envelope) {
	w.emitted(from, e)
	descs := func(ds []rref.RRefDesc, to WorkerID, bindName string) {
		for _, d := range ds {
			mon := w.mw()
			mon.owners.set(d.RRef, d.Owner)
			w.set(tableOwners, rrefKey(d.RRef))
			if d.Cut != rref.ErrorKindNone {
				// A cut handle passed on: its copy is cut too, never confirmed
				// and never deleted, and its value may be gone (S1's exception).
				mon.mark(&mon.exempt, factExempt, d.Fork)
				w.set(tableExempt, forkKey(d.Fork))
			}
			if d.Parent == (ForkID{Worker: d.RRef.Worker, Local: d.RRef.Local}) {
				mon.path.set(d.Fork, nil)
				mon.mark(&mon.answered, factAnswered, d.Fork) // the owner knew the fork when it sent it
				w.set(tablePath, forkKey(d.Fork))
				w.set(tableAnswered, forkKey(d.Fork))
			} else {
				// Children are a set to every reader: two steps that add
				// to one commute.
				mon.children.set(d.Parent, append(slices.Clone(mon.children.m[d.Parent]), d.Fork))
				w.set(tableChildren, forkKey(d.Parent))
				mon.path.set(d.Fork, append(slices.Clone(mon.path.m[d.Parent]), from))
				w.read(tablePath, forkKey(d.Parent))
				w.set(tablePath, forkKey(d.Fork))
				// A child of a cut handle is as cut as its parent: the
				// crash's exemption holds for it too. A child of a fork
				// the owner confirmed before the crash is not exempt.
				w.read(tableExempt, forkKey(d.Parent))
				if mon.exempt.m[d.Parent] {
					mon.mark(&mon.exempt, factExempt, d.Fork)
					w.set(tableExempt, forkKey(d.Fork))
				}
			}
			if bindName != "" {
				w.pw().addTravel(d.Fork, travelling{to: to, name: bindName, rref: d.RRef, fork: d.Fork})
				w.write(tableTravel, forkKey(d.Fork))
			}
		}
	}
	switch m := e.Msg.(type) {
	case *rref.Call:
		name := ""
		if m.Function == "__pass" {
			name = string(m.Args)
		}
		descs(m.RRefs, e.To, name)
	case *rref.CallRet:
		name := w.p.returns.m[[2]uint64{uint64(e.To), m.CallID}]
		w.read(tableReturns, pairKey([2]uint64{uint64(e.To), m.CallID}))
		descs(m.RRefs, e.To, name)
	case *rref.RemoteCall:
		mon := w.mw()
		mon.path.set(m.Fork, nil)
		w.set(tablePath, forkKey(m.Fork))
		descs(m.RRefs, e.To, "")
	case *rref.RemoteRet:
		// Read for children (S2) and for forks below a crash (S1), never
		// for a creator's fork: the answer to its fetch that confirms it
		// (FetchRet.Confirms) needs no mark.
		mon := w.mw()
		mon.mark(&mon.answered, factAnswered, m.Fork)
		w.set(tableAnswered, forkKey(m.Fork))

	case *rref.ForkAck:
		// Answered when sent; refused only when the refusal is the answer
		// its user takes (world.received): an owner that gave a value up
		// refuses a resent request it had confirmed, and the user acts
		// on whichever answer reaches it first.
		mon := w.mw()
		mon.mark(&mon.answered, factAnswered, m.Fork)
		w.set(tableAnswered, forkKey(m.Fork))
	case *rref.ChildAccept:
		if e.From == w.ownerOf(m.RRef) {
			mon := w.mw()
			mon.mark(&mon.answered, factAnswered, m.Child) // the owner as callee answers directly
			w.set(tableAnswered, forkKey(m.Child))
			if m.Refused {
				mon.mark(&mon.refused, factRefused, m.Child)
				w.set(tableRefused, forkKey(m.Child))
			}
		}
	case *rref.UserDelete:
		w.checkDelete(from, m)
	}
}

// checkDelete is S2 and the emission half of S3.
func (w *world) checkDelete(from WorkerID, m *rref.UserDelete) {
	mon := w.mon
	w.read(tableChildren, forkKey(m.Fork))
	w.fp.ReadTable(tableHandles) // childDead, and the S3 check below
	for _, child := range mon.children.m[m.Fork] {
		w.read(tableAnswered, forkKey(child))
		w.read(tableTravel, forkKey(child))
		if mon.answered.m[child] {
			continue
		}
		if t, ok := w.p.travel.m[child]; ok && w.slots[t.to-1].dead {
			continue
		}
		if w.childDead(child) || w.slots[w.ownerOf(m.RRef)-1].dead {
			continue
		}
		w.fail(rref.InvariantS2, 0, "%s sent the delete of fork %v while its child %v was not yet answered by the owner", w.name(from), m.Fork, child)
	}
	mon = w.mw()
	w.write(tableDeletes, forkKey(m.Fork))
	w.read(tableRefused, forkKey(m.Fork))
	if mon.countDelete(m.Fork) > 1 {
		w.fail(rref.InvariantS3, 0, "%s sent a second delete for fork %v", w.name(from), m.Fork)
	}
	if mon.refused.m[m.Fork] {
		w.fail(rref.InvariantS3, 0, "%s sent a delete for fork %v, which the owner refused", w.name(from), m.Fork)
	}
	for k, h := range w.p.handles.m {
		if k.w == from && h.fork == m.Fork && !h.released {
			w.fail(rref.InvariantS3, 0, "%s sent a delete for its handle %s, which it has not released", w.name(from), k.name)
		}
	}
}

// childDead reports whether the worker holding child fork f is dead.
func (w *world) childDead(f ForkID) bool {
	for k, h := range w.p.handles.m {
		if h.fork == f {
			return w.slots[k.w-1].dead
		}
	}
	return false
}

// checkFreed is S1: nothing is freed while a handle to it lives.
func (w *world) checkFreed(owner WorkerID, id RRefID) {
	mon := w.mon
	if mon.exemptRRef.m[id] {
		return
	}
	w.fp.ReadTable(tableHandles)
	w.fp.ReadTable(tableTravel)
	w.fp.ReadTable(tableExempt)
	keys := make([]handleKey, 0, len(w.p.handles.m))
	for k := range w.p.handles.m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, cmpHandleKey)
	for _, k := range keys {
		h := w.p.handles.m[k]
		if h.rref != id || h.released || w.slots[k.w-1].dead || mon.exempt.m[h.fork] && h.fork != (ForkID{}) {
			continue
		}
		w.fail(rref.InvariantS1, 0, "%s freed %v while %s still holds %s", w.name(owner), id, w.name(k.w), k.name)
		return
	}
	for f, t := range w.p.travel.m {
		if t.rref == id && !w.slots[t.to-1].dead && !mon.exempt.m[f] {
			w.fail(rref.InvariantS1, 0, "%s freed %v while a handle to it travels to %s", w.name(owner), id, w.name(t.to))
			return
		}
	}
}

// CheckEnd runs the checks due when the run is over: L1 (nothing waits
// forever), S3 (every released handle sent its delete) and L2 (no leak).
func (w *world) CheckEnd() {
	if w.violation != nil {
		return
	}
	if v := w.prog.End(w); v != nil {
		w.violation = v
		return
	}
	allReleased := len(w.p.travel.m) == 0
	for k, h := range w.p.handles.m {
		if w.slots[k.w-1].dead {
			continue
		}
		if !h.released {
			allReleased = false
			continue
		}
		if h.onOwner || w.mon.refused.m[h.fork] || w.mon.exempt.m[h.fork] || w.mon.exemptRRef.m[h.rref] {
			continue
		}
		if o := w.ownerOf(h.rref); w.slots[o-1].dead {
			continue
		}
		if n := w.mon.deletes.m[h.fork]; n != 1 {
			w.fail(rref.InvariantS3, 0, "%s released %s but sent %d deletes", w.name(k.w), k.name, n)
			return
		}
	}
	if !allReleased {
		return
	}
	for i := range w.slots {
		cr := w.slots[i].held.core
		if w.slots[i].dead {
			continue
		}
		if n := cr.Counters(); !n.Clean() {
			w.fail(rref.InvariantL2, 0, "every handle is released and the network settled, yet %s holds owners=%d forks=%d pending_users=%d pending_children=%d\n%s",
				w.sc.Workers[i], n.Owners, n.Forks, n.PendingUsers, n.PendingChildren, cr.Dump())
			return
		}
		if hot := cr.Hot(); len(hot) > 0 {
			w.fail(rref.InvariantL2, 0, "%s rests in hot states: %s", w.sc.Workers[i], strings.Join(hot, ", "))
			return
		}
	}
}

// AppendState appends a canonical encoding of the whole world: the
// program counter, and the digests of the cores, the messages in flight, the
// program's state and the monitor. Each digest is computed when its part
// changes, not for every state, and the messages' sum does not depend on
// their order (see digest).
func (w *world) AppendState(b []byte) []byte {
	b = binary.AppendUvarint(b, uint64(w.prog.PC()))
	b = strconv.AppendBool(b, w.returning)
	for i := range w.slots {
		c := w.slots[i].held.core
		if w.slots[i].dead {
			b = append(b, 'X')
			continue
		}
		if w.fresh {
			// The clone check: everything afresh, and the core's cached
			// digests checked against it.
			fresh := c.RecomputeStateDigest()
			if cached := c.StateDigest(); cached != fresh {
				w.fail("encoding", 0, "%s's cached state digest is stale:\n%s", w.name(WorkerID(i+1)), c.Dump())
			}
			w.slots[i].key = digest(fresh)
		} else if w.slots[i].key == (digest{}) {
			w.slots[i].key = digest(c.StateDigest()) // a shared core is hashed once
		}
		b = w.slots[i].key.append(b)
	}
	var inflight digest
	for _, m := range w.inflight {
		inflight = inflight.add(m.digest)
	}
	b = binary.AppendUvarint(b, uint64(len(w.inflight)))
	b = inflight.append(b)
	pSum, monSum, factSum := w.p.sum, w.mon.sum, w.factSum
	if w.fresh {
		if factSum = w.recomputeFactSum(); factSum != w.factSum {
			w.fail("encoding", 0, "the counted facts' sum is stale")
		}
		// The clone check: the sums from the facts themselves, and the
		// kept ones checked against them.
		pSum, monSum = w.p.recomputeSum(), w.mon.recomputeSum()
		if pSum != w.p.sum {
			w.fail("encoding", 0, "the program state's sum is stale")
		}
		if monSum != w.mon.sum {
			w.fail("encoding", 0, "the monitor's sum is stale")
		}
	}
	b = pSum.append(b)
	b = binary.AppendUvarint(b, uint64(len(w.p.dups)))
	b = factSum.append(b)
	return monSum.append(b)
}

// cmpHandleKey orders handles by worker, then name: a comparison
// function, not sort.Slice's reflection, which allocates on every call.
func cmpHandleKey(a, b handleKey) int {
	if c := cmp.Compare(a.w, b.w); c != 0 {
		return c
	}
	return strings.Compare(a.name, b.name)
}
