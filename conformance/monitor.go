package conformance

import (
	"slices"
	"strings"

	"github.com/rrefkit/rref/generated/rref"
	"github.com/rrefkit/rref/internal/scenario"
	"github.com/rrefkit/rref/runtime/core"
)

// The monitor: the ground truth the invariants are checked against,
// built only from what programs did and what cores emitted, and the
// checks themselves, on every step and at the end.

// monitor is the ground truth the invariants are checked against. It only
// observes: what programs did, and what cores emitted.
type monitor struct {
	values        table[RRefID, int64] // expected value; absent for a failing remote
	failing       table[RRefID, bool]
	deletes       table[ForkID, int]
	answered      table[ForkID, bool]
	refused       table[ForkID, bool]
	children      table[ForkID, []ForkID] // slices never written in place: appended to a copy
	path          table[ForkID, []WorkerID]
	exempt        table[ForkID, bool]
	exemptRRef    table[RRefID, bool]
	remoteArrived table[RRefID, bool]
	owners        table[RRefID, WorkerID]
	crashed       bool
	sum           digest // of the facts the state key covers (sums.go)
}

func newMonitor() *monitor {
	return &monitor{
		values:        newTable[RRefID, int64](tableValues, rrefKey),
		failing:       newTable[RRefID, bool](tableFailing, rrefKey),
		deletes:       newTable[ForkID, int](tableDeletes, forkKey),
		answered:      newTable[ForkID, bool](tableAnswered, forkKey),
		refused:       newTable[ForkID, bool](tableRefused, forkKey),
		children:      newTable[ForkID, []ForkID](tableChildren, forkKey),
		path:          newTable[ForkID, []WorkerID](tablePath, forkKey),
		exempt:        newTable[ForkID, bool](tableExempt, forkKey),
		exemptRRef:    newTable[RRefID, bool](tableExemptRRef, rrefKey),
		remoteArrived: newTable[RRefID, bool](tableRemoteArrived, rrefKey),
		owners:        newTable[RRefID, WorkerID](tableOwners, rrefKey),
	}
}

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

// mw is the monitor, to change: copied first if a clone shares it.
func (w *world) mw() *monitor {
	if !w.monOwned {
		w.mon, w.monOwned = w.mon.clone(), true
	}
	return w.mon
}

// observe feeds the monitors with a message a worker emits.
func (w *world) observe(from WorkerID, e core.Envelope) {
	w.emitted(from, e)
	descs := func(ds []rref.RRefDesc, to WorkerID, bindName string) {
		for _, d := range ds {
			mon := w.mw()
			mon.owners.settle(w.fp, d.RRef, d.Owner)
			if d.Cut != rref.ErrorKindNone {
				// A cut handle passed on: its copy is cut too, never confirmed
				// and never deleted, and its value may be gone (S1's exception).
				mon.mark(w.fp, &mon.exempt, factExempt, d.Fork)
			}
			if d.Parent == (ForkID{Worker: d.RRef.Worker, Local: d.RRef.Local}) {
				mon.path.settle(w.fp, d.Fork, nil)
				mon.mark(w.fp, &mon.answered, factAnswered, d.Fork) // the owner knew the fork when it sent it
			} else {
				// Children are a set to every reader: two steps that add
				// to one commute.
				growList(w.fp, &mon.children, d.Parent, d.Fork)
				mon.path.settle(w.fp, d.Fork, append(slices.Clone(mon.path.get(w.fp, d.Parent)), from))
				// A child of a cut handle is as cut as its parent: the
				// crash's exemption holds for it too. A child of a fork
				// the owner confirmed before the crash is not exempt.
				if mon.exempt.get(w.fp, d.Parent) {
					mon.mark(w.fp, &mon.exempt, factExempt, d.Fork)
				}
			}
			if bindName != "" {
				w.pw().addTravel(w.fp, d.Fork, travelling{to: to, name: bindName, rref: d.RRef, fork: d.Fork})
			}
		}
	}
	switch m := e.Msg.(type) {
	case *rref.Call:
		name := ""
		if m.Function == scenario.FnPass {
			name = string(m.Args)
		}
		descs(m.RRefs, e.To, name)
	case *rref.CallRet:
		name := w.p.returns.get(w.fp, [2]uint64{uint64(e.To), m.CallID})
		descs(m.RRefs, e.To, name)
	case *rref.RemoteCall:
		mon := w.mw()
		mon.path.settle(w.fp, m.Fork, nil)
		descs(m.RRefs, e.To, "")
	case *rref.RemoteRet:
		// Read for children (S2) and for forks below a crash (S1), never
		// for a creator's fork: the answer to its fetch that confirms it
		// (FetchRet.Confirms) needs no mark.
		mon := w.mw()
		mon.mark(w.fp, &mon.answered, factAnswered, m.Fork)

	case *rref.ForkAck:
		// Answered when sent; refused only when the refusal is the answer
		// its user takes (world.received): an owner that gave a value up
		// refuses a resent request it had confirmed, and the user acts
		// on whichever answer reaches it first.
		mon := w.mw()
		mon.mark(w.fp, &mon.answered, factAnswered, m.Fork)
	case *rref.ChildAccept:
		if e.From == w.ownerOf(m.RRef) {
			mon := w.mw()
			mon.mark(w.fp, &mon.answered, factAnswered, m.Child) // the owner as callee answers directly
			if m.Refused {
				mon.mark(w.fp, &mon.refused, factRefused, m.Child)
			}
		}
	case *rref.UserDelete:
		w.checkDelete(from, m)
	}
}

// checkDelete is S2 and the emission half of S3.
func (w *world) checkDelete(from WorkerID, m *rref.UserDelete) {
	mon := w.mon
	handles := w.p.handles.all(w.fp) // childDead, and the S3 check below
	for _, child := range mon.children.get(w.fp, m.Fork) {
		if mon.answered.get(w.fp, child) {
			continue
		}
		if t, ok := w.p.travel.lookup(w.fp, child); ok && w.slots[t.to-1].dead {
			continue
		}
		if w.childDead(child) || w.slots[w.ownerOf(m.RRef)-1].dead {
			continue
		}
		w.fail(rref.InvariantS2, 0, "%s sent the delete of fork %v while its child %v was not yet answered by the owner", w.name(from), m.Fork, child)
	}
	mon = w.mw()
	if mon.countDelete(w.fp, m.Fork) > 1 {
		w.fail(rref.InvariantS3, 0, "%s sent a second delete for fork %v", w.name(from), m.Fork)
	}
	if mon.refused.get(w.fp, m.Fork) {
		w.fail(rref.InvariantS3, 0, "%s sent a delete for fork %v, which the owner refused", w.name(from), m.Fork)
	}
	for k, h := range handles {
		if k.w == from && h.fork == m.Fork && !h.released {
			w.fail(rref.InvariantS3, 0, "%s sent a delete for its handle %s, which it has not released", w.name(from), k.name)
		}
	}
}

// childDead reports whether the worker holding child fork f is dead.
func (w *world) childDead(f ForkID) bool {
	for k, h := range w.p.handles.all(w.fp) {
		if h.fork == f {
			return w.slots[k.w-1].dead
		}
	}
	return false
}

// checkFreed is S1: nothing is freed while a handle to it lives.
func (w *world) checkFreed(owner WorkerID, id RRefID) {
	mon := w.mon
	if mon.exemptRRef.get(w.fp, id) {
		return
	}
	handles, exempt := w.p.handles.all(w.fp), mon.exempt.all(w.fp)
	keys := make([]handleKey, 0, len(handles))
	for k := range handles {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, cmpHandleKey)
	for _, k := range keys {
		h := handles[k]
		if h.rref != id || h.released || w.slots[k.w-1].dead || exempt[h.fork] && h.fork != (ForkID{}) {
			continue
		}
		w.fail(rref.InvariantS1, 0, "%s freed %v while %s still holds %s", w.name(owner), id, w.name(k.w), k.name)
		return
	}
	for f, t := range w.p.travel.all(w.fp) {
		if t.rref == id && !w.slots[t.to-1].dead && !exempt[f] {
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
	allReleased := len(w.p.travel.untracked()) == 0
	for k, h := range w.p.handles.untracked() {
		if w.slots[k.w-1].dead {
			continue
		}
		if !h.released {
			allReleased = false
			continue
		}
		if h.onOwner || w.mon.refused.untracked()[h.fork] || w.mon.exempt.untracked()[h.fork] || w.mon.exemptRRef.untracked()[h.rref] {
			continue
		}
		if o := w.ownerOf(h.rref); w.slots[o-1].dead {
			continue
		}
		if n := w.mon.deletes.untracked()[h.fork]; n != 1 {
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
