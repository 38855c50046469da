package conformance

import (
	"fmt"
	"slices"
	"strconv"

	"github.com/rrefkit/rref/generated/rref"
	"github.com/rrefkit/rref/internal/scenario"
	"github.com/rrefkit/rref/runtime/core"
)

// The scenario's side of a run: the world is a scenario.Target, whose
// commands drive the cores, and the program's handles, fetches, calls
// and functions' runs are kept here.

// runState is the program's side of a run: its handles and fetches, the
// calls whose answer binds a handle, and what travels.
type runState struct {
	// Records are never written once in a map (a change replaces the
	// record): the maps are shared with clones and copied on write.
	handles  table[handleKey, *progHandle]
	fetches  table[handleKey, *fetchState]
	fetchIDs table[[2]uint64, *fetchState] // (worker, fetch id) -> the fetch, until answered
	returns  table[[2]uint64, string]      // (caller, call id) -> name of the returned handle
	travel   table[ForkID, travelling]     // passed or returned handles not yet bound
	dups     []dupRule                     // never changed in place: a change makes a new slice
	sum      digest                        // of the facts the state key covers (sums.go)
}

func newRunState() *runState {
	return &runState{
		handles:  newTable[handleKey, *progHandle](tableHandles, handleLoc),
		fetches:  newTable[handleKey, *fetchState](tableFetches, handleLoc),
		fetchIDs: newTable[[2]uint64, *fetchState](tableFetchIDs, pairKey),
		returns:  newTable[[2]uint64, string](tableReturns, pairKey),
		travel:   newTable[ForkID, travelling](tableTravel, forkKey),
	}
}

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

func valueBytes(v int64) []byte { return []byte(strconv.FormatInt(v, 10)) }

func (w *world) bind(k handleKey, h core.HandleID) {
	st := w.peek(k.w).Handle(h)
	ph := &progHandle{id: h, rref: st.RRef, fork: st.Fork, onOwner: st.IsOwner}
	if st.IsOwner {
		ph.fork = ForkID{}
	}
	w.pw().setHandle(w.fp, k, ph)
}

// The commands' effects: world is a scenario.Target.

func (w *world) key(wn, x string) handleKey { return handleKey{w.ids[wn], x} }

func (w *world) New(wn, x string, v int64) error {
	wid := w.ids[wn]
	h := w.core(wid).NewLocal(valueBytes(v))
	w.bind(handleKey{wid, x}, h)
	id := w.p.handles.get(w.fp, handleKey{wid, x}).rref
	w.mw().values.put(w.fp, id, v)
	w.drain(wid)
	return nil
}

func (w *world) Remote(wn, owner, x string, v int64, fail bool) error {
	wid := w.ids[wn]
	fn := scenario.FnIdentity
	if fail {
		fn = scenario.FnFail
	}
	h, err := w.core(wid).Remote(w.ids[owner], fn, valueBytes(v), nil)
	if err != nil {
		return err
	}
	k := handleKey{wid, x}
	w.bind(k, h)
	id := w.p.handles.get(w.fp, k).rref
	mon := w.mw()
	mon.owners.settle(w.fp, id, w.ids[owner])
	if fail {
		mon.failing.put(w.fp, id, true)
	} else {
		mon.values.put(w.fp, id, v)
	}
	w.drain(wid)
	return nil
}

func (w *world) Pass(wn, to, x, y string) error {
	wid := w.ids[wn]
	h := w.p.handles.get(w.fp, handleKey{wid, x})
	if _, err := w.core(wid).Call(w.ids[to], scenario.FnPass, []byte(y), []core.HandleID{h.id}); err != nil {
		return err
	}
	w.drain(wid)
	return nil
}

func (w *world) Return(wn, caller, x, y string) error {
	cid := w.ids[caller]
	id, err := w.core(cid).Call(w.ids[wn], scenario.FnReturn, []byte(x), nil)
	if err != nil {
		return err
	}
	w.pw().returns.put(w.fp, [2]uint64{uint64(cid), id}, y)
	w.returning = true
	w.write(tableReturning, 0)
	w.drain(cid)
	return nil
}

func (w *world) Fetch(wn, x string) error {
	wid := w.ids[wn]
	k := handleKey{wid, x}
	h := w.p.handles.get(w.fp, k)
	f := &fetchState{liveAtIssue: !h.released, timedOut: h.timedOut, issued: *h}
	f.issued.key = k
	want, known := w.mon.values.lookup(w.fp, h.rref)
	if failing := w.mon.failing.get(w.fp, h.rref); known {
		f.holds = scenario.Holding{Known: true, Value: string(valueBytes(want))}
	} else if failing {
		f.holds = scenario.Holding{Known: true, Fail: true}
	}
	id := h.id
	if h.released {
		id = 0 // a released handle: the core answers deleted at once
	}
	w.pw().setFetch(w.fp, k, f)
	fid := w.core(wid).Fetch(id)
	w.pw().fetchIDs.put(w.fp, [2]uint64{uint64(wid), fid}, f)
	w.drain(wid)
	return nil
}

func (w *world) Release(wn, x string) error {
	wid := w.ids[wn]
	h := w.p.handles.get(w.fp, handleKey{wid, x})
	if !h.released {
		released := *h // a new record: clones share the old one
		released.released = true
		w.pw().setHandle(w.fp, handleKey{wid, x}, &released)
		if err := w.core(wid).Release(h.id); err != nil {
			w.fail(rref.InvariantS5, 0, "%s's release of %s refused: %v", wn, x, err)
		}
	}
	w.drain(wid)
	return nil
}

func (w *world) Timeout(wn, x string) error {
	wid := w.ids[wn]
	timed := *w.p.handles.get(w.fp, handleKey{wid, x}) // a new record: clones share the old one
	timed.timedOut = true
	h := &timed
	w.pw().setHandle(w.fp, handleKey{wid, x}, h)
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
					w.mw().markExemptRRef(w.fp, v) // given up: it will never exist
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
		if h.Kind == core.HeldValue && h.RRef.Worker != id && !w.mon.remoteArrived.get(w.fp, h.RRef) {
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
	return w.p.handles.get(w.fp, w.key(wn, x)) != nil
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
	f := w.p.fetches.get(w.fp, w.key(wn, x))
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
	for f, t := range w.p.travel.all(w.fp) {
		if t.to == k.w && t.name == k.name && t.rref == st.RRef {
			w.pw().delTravel(w.fp, f)
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
		if run.Fn == scenario.FnFail {
			fail, value = core.Failure{Kind: rref.ErrorKindUser, Message: "scenario function failed"}, nil
		}
		if err := cr.CompleteRemote(run.RRef, value, fail); err != nil {
			w.fail(InvariantOnce, 0, "%s could not store what its function made: %v", w.name(id), err)
		}
	case run.Fn == scenario.FnPass:
		if len(run.Handles) == 1 {
			w.bindTravelled(handleKey{id, string(run.Args)}, run.Handles[0])
		}
		if !w.unreduced {
			w.eager = append(w.eager, [2]uint64{uint64(run.From), run.CallID})
		}
		cr.Return(run.From, run.CallID, nil, nil, core.Failure{})
	case run.Fn == scenario.FnReturn:
		h := w.p.handles.get(w.fp, handleKey{id, string(run.Args)})
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
	issued, ok := w.p.fetchIDs.lookup(w.fp, fid)
	if !ok {
		return
	}
	p := w.pw()
	answered := *issued // a new record: clones share the old one
	f := &answered
	f.done, f.value, f.err = true, fr.Value, fr.Err
	if p.fetches.get(w.fp, f.issued.key) == issued {
		p.setFetch(w.fp, f.issued.key, f) // still the name's last fetch
	}
	p.fetchIDs.remove(w.fp, fid)
	h := &f.issued // checked against the handle it was issued on, not the name's binding now
	// The checks below read these facts, whichever the answer is.
	mon := w.mon
	want, known := mon.values.lookup(w.fp, h.rref)
	failing := mon.failing.get(w.fp, h.rref)
	exempt, refused := mon.exempt.get(w.fp, h.fork), mon.refused.get(w.fp, h.fork)
	exemptRRef := mon.exemptRRef.get(w.fp, h.rref)
	where := fmt.Sprintf("%s's fetch of %s", w.name(id), h.key.name)
	switch fr.Err {
	case rref.ErrorKindNone:
		if !known || string(fr.Value) != string(valueBytes(want)) {
			w.fail(rref.InvariantS4, 0, "%s returned %q, not the value", where, fr.Value)
		}
	case rref.ErrorKindUser:
		if !failing {
			w.fail(rref.InvariantS4, 0, "%s failed with a user error, but the function succeeded", where)
		}
	case rref.ErrorKindDeleted:
		if f.liveAtIssue {
			w.fail(rref.InvariantS4, 0, "%s failed with deleted on a live handle", where)
		}
	case rref.ErrorKindLost:
		// Only a handle a crash may have cut off (S1's exceptions), or one
		// the owner refused, may be lost; a crash elsewhere excuses nothing.
		cut := exempt && h.fork != (ForkID{}) || exemptRRef || refused && mon.crashed
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
	if o, ok := w.mon.owners.lookup(w.fp, id); ok {
		return o
	}
	return id.Worker
}
