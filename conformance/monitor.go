package conformance

import (
	"slices"
	"strings"

	"github.com/rrefkit/rref/generated/rref"
	"github.com/rrefkit/rref/runtime/core"
)

// The monitor: the ground truth the invariants are checked against,
// built only from what programs did and what cores emitted, and the
// checks themselves, on every step and at the end.

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
