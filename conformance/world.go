package conformance

import (
	"encoding/binary"
	"fmt"
	"slices"

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
		w.mw().remoteArrived.settle(w.fp, rc.RRef, true)
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
