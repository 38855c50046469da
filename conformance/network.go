package conformance

import (
	"slices"
	"strconv"

	"github.com/rrefkit/rref/generated/rref"
	"github.com/rrefkit/rref/runtime/core"
)

// The simulated network: what a core's Ready sends goes in flight, to be
// delivered in any order the search chooses; a crash drops what was in
// flight to and from its worker.

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
	// A crash touches everything (Crash), so reading whole tables here
	// needs no footprint.
	for f, p := range mon.path.untracked() {
		if !mon.answered.untracked()[f] && slices.Contains(p, x) {
			mon.mark(w.fp, &mon.exempt, factExempt, f)
		}
	}
	for _, h := range w.p.handles.untracked() {
		if h.rref.Worker == x && !mon.remoteArrived.untracked()[h.rref] {
			mon.markExemptRRef(w.fp, h.rref)
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
		y, ok := w.p.returns.lookup(w.fp, [2]uint64{uint64(id), cres.CallID})
		if !ok {
			continue
		}
		w.pw().returns.remove(w.fp, [2]uint64{uint64(id), cres.CallID})
		if len(cres.Handles) == 1 {
			w.bindTravelled(handleKey{id, y}, cres.Handles[0])
		}
	}
}
