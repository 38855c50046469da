package conformance

import (
	"encoding/binary"
	"slices"

	"github.com/rrefkit/rref/generated/rref"
	"github.com/rrefkit/rref/runtime/core"
)

// The monitor keeps its own count of what each core's counters report
// (core.Counters): the users awaiting their owner's answer (pending_users),
// the children a user lent and not yet heard back of (pending_children),
// and the fetches and calls awaiting their reply (pending_messages). It
// counts from what it sees: the messages each core emits, each delivery,
// each notice of a death, and the program's fetches. After every step the
// counters of each core the step changed are compared with its counts
// (InvariantCounters), so that a counter that drifts is caught where it
// drifts, not only when an end check reads it at zero.
//
// Every fact here belongs to one worker and changes only in a step that
// changes that worker's core (an emission from it, a delivery or a notice
// to it). Two deliveries to one worker may still commute (the core ends
// alike either way, reorder.go), so each fact a step looks up or changes
// is in its footprint too (tableFacts, by kind and key). The check after
// the step reads what the step left, a function of the state it enters,
// and needs no record. The functions run (InvariantOnce) are kept beside
// them, in the same list.

// InvariantCounters is the violation of a core's counter that differs
// from the monitor's count.
const InvariantCounters = "counters"

// The kinds of counted facts, and what key, a, b and c hold in each.
const (
	factUserWait = 'u' // a user awaits its owner's answer: key its fork, a its worker, b the owner
	factLent     = 'l' // a child lent: key its fork, a the lender, b the receiver, c the owner
	factCall     = 'k' // a call awaits its reply: key (caller, call id), a the callee
	factTold     = 'o' // key (w, dead): w was told of dead's death
	factRan      = 'n' // a remote's function ran: key its value, a where
	factRanCall  = 'm' // a call's function ran: key (caller, call id), a where
)

// fact is one counted fact.
type fact struct {
	key     [2]uint64
	a, b, c WorkerID
	kind    byte // last: 32 bytes in all, a world holds inlineFacts of them
}

func (f *fact) digest() digest {
	b := make([]byte, 0, factRoom)
	b = append(b, f.kind)
	b = binary.AppendUvarint(b, f.key[0])
	b = binary.AppendUvarint(b, f.key[1])
	b = binary.AppendUvarint(b, uint64(f.a))
	b = binary.AppendUvarint(b, uint64(f.b))
	b = binary.AppendUvarint(b, uint64(f.c))
	return digestOf(b)
}

func forkPair(f ForkID) [2]uint64 { return [2]uint64{uint64(f.Worker), f.Local} }

// factLoc is a fact's location in footprints.
func factLoc(kind byte, key [2]uint64) uint64 { return pairKey(key) ^ uint64(kind)<<56 }

func (w *world) findFact(kind byte, key [2]uint64) int {
	w.read(tableFacts, factLoc(kind, key))
	for i := range w.facts {
		if w.facts[i].kind == kind && w.facts[i].key == key {
			return i
		}
	}
	return -1
}

// addFact adds f unless a fact of its kind and key is there.
func (w *world) addFact(f fact) {
	if w.findFact(f.kind, f.key) >= 0 {
		return
	}
	w.write(tableFacts, factLoc(f.kind, f.key))
	w.facts = append(w.facts, f)
	w.factSum = w.factSum.add(f.digest())
}

// delFact drops the i-th fact.
func (w *world) delFact(i int) {
	w.write(tableFacts, factLoc(w.facts[i].kind, w.facts[i].key))
	w.factSum = w.factSum.sub(w.facts[i].digest())
	w.facts = slices.Delete(w.facts, i, i+1)
}

// delFacts drops every fact drop selects.
func (w *world) delFacts(drop func(*fact) bool) {
	w.fp.ReadTable(tableFacts) // it looks at every fact
	for i := len(w.facts) - 1; i >= 0; i-- {
		if drop(&w.facts[i]) {
			w.delFact(i)
		}
	}
}

func (w *world) recomputeFactSum() digest {
	var sum digest
	for i := range w.facts {
		sum = sum.add(w.facts[i].digest())
	}
	return sum
}

// countFacts counts the facts of a kind whose a is id.
func (w *world) countFacts(kind byte, id WorkerID) int {
	n := 0
	for i := range w.facts {
		if w.facts[i].kind == kind && w.facts[i].a == id {
			n++
		}
	}
	return n
}

// emitted counts what a message worker from emits starts: a call awaiting
// its reply, a user awaiting its owner's answer (a remote's creator), a
// child lent (a handle passed on that is neither the owner's nor cut off).
func (w *world) emitted(from WorkerID, e core.Envelope) {
	var descs []rref.RRefDesc
	switch m := e.Msg.(type) {
	case *rref.Call:
		w.addFact(fact{kind: factCall, key: [2]uint64{uint64(from), m.CallID}, a: e.To})
		descs = m.RRefs
	case *rref.CallRet:
		descs = m.RRefs
	case *rref.RemoteCall:
		w.addFact(fact{kind: factUserWait, key: forkPair(m.Fork), a: from, b: e.To})
		descs = m.RRefs
	}
	for _, d := range descs {
		if d.Cut == rref.ErrorKindNone && d.Owner != from {
			w.addFact(fact{kind: factLent, key: forkPair(d.Fork), a: from, b: e.To, c: d.Owner})
		}
	}
}

// told reports whether worker w was told of dead's death.
func (w *world) told(to, dead WorkerID) bool {
	return w.findFact(factTold, [2]uint64{uint64(to), uint64(dead)}) >= 0
}

// received counts what delivery m to a live worker settles or starts, as
// the receiver's core will see it: nothing from a worker it knows is dead.
func (w *world) received(m inFlight) {
	to := m.to
	if m.notice {
		w.addFact(fact{kind: factTold, key: [2]uint64{uint64(to), uint64(m.from)}})
		w.delFacts(func(f *fact) bool {
			switch f.kind {
			case factUserWait:
				return f.a == to && f.b == m.from
			case factLent:
				return f.a == to && (f.b == m.from || f.c == m.from)
			case factCall:
				return WorkerID(f.key[0]) == to && f.a == m.from
			}
			return false
		})
		return
	}
	if m.flush || w.told(to, m.from) {
		return
	}
	// settle drops the fact of kind and key if it is to's and answered
	// by m's sender.
	settle := func(kind byte, key [2]uint64) bool {
		i := w.findFact(kind, key)
		if i < 0 {
			return false
		}
		f := &w.facts[i]
		answers := f.a == to && f.b == m.from
		if kind == factCall {
			answers = f.a == m.from // the callee; the key names the caller
		}
		if !answers {
			return false
		}
		w.delFact(i)
		return true
	}
	var descs []rref.RRefDesc
	switch msg := m.msg.(type) {
	case *rref.Call:
		descs = msg.RRefs
	case *rref.CallRet:
		if settle(factCall, [2]uint64{uint64(to), msg.CallID}) {
			descs = msg.RRefs
		}
	case *rref.RemoteRet:
		settle(factUserWait, forkPair(msg.Fork))
	case *rref.ForkAck:
		if settle(factUserWait, forkPair(msg.Fork)) && msg.Refused {
			// The user takes this answer, the first to reach it: its fork
			// is refused (S3, S4).
			mon := w.mw()
			mon.mark(w.fp, &mon.refused, factRefused, msg.Fork)
		}
	case *rref.FetchRet:
		if f, ok := w.p.fetchIDs.lookup(w.fp, [2]uint64{uint64(to), msg.FetchID}); ok && msg.Confirms {
			settle(factUserWait, forkPair(f.issued.fork))
		}
	case *rref.ChildAccept:
		settle(factLent, forkPair(msg.Child))
	}
	for _, d := range descs {
		// A handle from its owner is confirmed as it arrives, one from a
		// dead owner orphaned, a cut one lost: only the rest wait.
		if d.Cut == rref.ErrorKindNone && d.Owner != to && d.Parent != ForkID(d.RRef) && !w.told(to, d.Owner) {
			w.addFact(fact{kind: factUserWait, key: forkPair(d.Fork), a: to, b: d.Owner})
		}
	}
}

// forgetDead drops what the monitor counted for worker x, which died: its
// counters are never checked again, nothing runs there again, and facts
// kept for it would tell apart states whose dead worker's memory differs,
// which nothing reads.
func (w *world) forgetDead(x WorkerID) {
	w.delFacts(func(f *fact) bool {
		switch f.kind {
		case factCall, factTold:
			return WorkerID(f.key[0]) == x
		}
		return f.a == x
	})
}

// checkCounters compares the counters of each live core the last step
// changed (world.changed) with the monitor's counts.
func (w *world) checkCounters() {
	for i := range w.slots {
		id := WorkerID(i + 1)
		if !w.changedCore(id) || w.slots[i].dead {
			continue
		}
		calls := 0
		for j := range w.facts {
			if f := &w.facts[j]; f.kind == factCall && WorkerID(f.key[0]) == id {
				calls++
			}
		}
		// After the step, on the state it reached: what the footprint says
		// of the step itself holds whatever this reads.
		for k := range w.p.fetchIDs.untracked() {
			if WorkerID(k[0]) == id {
				calls++
			}
		}
		h := w.slots[i].held
		if !h.counted {
			h.counters, h.counted = h.core.Counters(), true
		}
		n := &h.counters
		for _, c := range [...]struct {
			name      string
			got, want int
		}{
			{"pending_users", n.PendingUsers, w.countFacts(factUserWait, id)},
			{"pending_children", n.PendingChildren, w.countFacts(factLent, id)},
			{"pending_messages", n.PendingMessages, calls},
		} {
			if c.got != c.want {
				w.fail(InvariantCounters, 0, "%s's %s is %d, but the monitor counts %d\n%s", w.name(id), c.name, c.got, c.want, w.slots[i].held.core.Dump())
				return
			}
		}
	}
}

// touch notes that worker id's core changed in this step. Workers past
// the bit set's 64 count as changed in every step.
func (w *world) touch(id WorkerID) {
	if id <= 64 {
		w.changed |= 1 << (id - 1)
	}
}

func (w *world) changedCore(id WorkerID) bool { return id > 64 || w.changed&(1<<(id-1)) != 0 }
