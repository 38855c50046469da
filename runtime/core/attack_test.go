package core_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"

	"github.com/rrefkit/rref/generated/rref"
	"github.com/rrefkit/rref/runtime/core"
)

// Workers of the attack tests: A creates values on the owner B and passes
// them to C; M is a hostile member that sends whatever it likes.
const (
	wA core.WorkerID = iota + 1
	wB
	wC
	wM
)

// group is a small explicit network of cores whose programs play along:
// remotes complete with their arguments, calls bind their RRefs and return.
type group struct {
	t       *testing.T
	cores   map[core.WorkerID]*core.Core
	net     []core.Envelope
	held    map[core.WorkerID][]core.HandleID // RRefs calls bound on a worker
	ran     map[core.WorkerID]int             // calls run on a worker
	fetched map[core.WorkerID][]core.FetchResult
	freed   map[core.WorkerID][]core.Freed
	errs    map[core.WorkerID][]error
}

func newGroup(t *testing.T, opts ...core.Option) *group {
	g := &group{t: t, cores: map[core.WorkerID]*core.Core{}, held: map[core.WorkerID][]core.HandleID{},
		ran: map[core.WorkerID]int{}, fetched: map[core.WorkerID][]core.FetchResult{},
		freed: map[core.WorkerID][]core.Freed{}, errs: map[core.WorkerID][]error{}}
	for _, id := range []core.WorkerID{wA, wB, wC, wM} {
		g.cores[id] = core.New(id, opts...)
	}
	return g
}

func (g *group) drain(id core.WorkerID) {
	c := g.cores[id]
	for c.HasReady() {
		r := c.TakeReady()
		g.net = append(g.net, r.Messages...)
		g.freed[id] = append(g.freed[id], r.Freed...)
		g.errs[id] = append(g.errs[id], r.Errors...)
		g.fetched[id] = append(g.fetched[id], r.Fetches...)
		for _, run := range r.Runs {
			switch run.Kind {
			case core.RunRemote:
				c.CompleteRemote(run.RRef, run.Args, core.Failure{})
			case core.RunCall:
				g.held[id] = append(g.held[id], run.Handles...)
				g.ran[id]++
				c.Return(run.From, run.CallID, nil, nil, core.Failure{})
			}
		}
	}
}

// forge puts a made-up message from `from` on the network.
func (g *group) forge(from, to core.WorkerID, m rref.Message) {
	g.net = append(g.net, core.Envelope{From: from, To: to, Msg: m})
}

// deliver delivers the oldest message matching match, reporting whether there was one.
func (g *group) deliver(match func(core.Envelope) bool) bool {
	i := slices.IndexFunc(g.net, match)
	if i < 0 {
		return false
	}
	e := g.net[i]
	g.net = slices.Delete(g.net, i, i+1)
	g.cores[e.To].Deliver(e.From, e.Msg)
	g.drain(e.To)
	return true
}

func (g *group) mustDeliver(from, to core.WorkerID, code rref.Code) {
	g.t.Helper()
	if !g.deliver(msg(from, to, code)) {
		g.t.Fatalf("no %v from %d to %d in flight", code, from, to)
	}
}

// settle delivers everything but what hold matches, oldest first.
func (g *group) settle(hold func(core.Envelope) bool) {
	for g.deliver(func(e core.Envelope) bool { return hold == nil || !hold(e) }) {
	}
}

func msg(from, to core.WorkerID, code rref.Code) func(core.Envelope) bool {
	return func(e core.Envelope) bool {
		return e.From == from && e.To == to && e.Msg.MessageCode() == code
	}
}

// inFlight returns the messages from `from` to `to` of one type.
func (g *group) inFlight(from, to core.WorkerID, code rref.Code) []rref.Message {
	var out []rref.Message
	for _, e := range g.net {
		if msg(from, to, code)(e) {
			out = append(out, e.Msg)
		}
	}
	return out
}

// remote has A create value on B and settles the network.
func (g *group) remote(value string) (core.HandleID, rref.RRefID, rref.ForkID) {
	g.t.Helper()
	h, err := g.cores[wA].Remote(wB, "identity", []byte(value), nil)
	if err != nil {
		g.t.Fatal(err)
	}
	g.drain(wA)
	g.settle(nil)
	s := g.cores[wA].Handle(h)
	if !s.Confirmed {
		g.t.Fatalf("remote %q not confirmed", value)
	}
	return h, s.RRef, s.Fork
}

// pass has A call C with h; the Call is left in flight. It returns the fork
// minted for C.
func (g *group) pass(from, to core.WorkerID, h core.HandleID) rref.ForkID {
	g.t.Helper()
	if _, err := g.cores[from].Call(to, "keep", nil, []core.HandleID{h}); err != nil {
		g.t.Fatal(err)
	}
	g.drain(from)
	calls := g.inFlight(from, to, rref.CodeCall)
	return calls[len(calls)-1].(*rref.Call).RRefs[0].Fork
}

func (g *group) release(id core.WorkerID, h core.HandleID) {
	g.t.Helper()
	if err := g.cores[id].Release(h); err != nil {
		g.t.Fatal(err)
	}
	g.drain(id)
}

func (g *group) wantFreed(id core.WorkerID, n int, when string) {
	g.t.Helper()
	if len(g.freed[id]) != n {
		g.t.Fatalf("%s: %d values freed on %d, want %d", when, len(g.freed[id]), id, n)
	}
}

// wantErrs checks that worker id reported exactly n errors since the last
// call, each bad input matching also target (when not nil), and forgets them.
func (g *group) wantErrs(id core.WorkerID, n int, target error) {
	g.t.Helper()
	errs := g.errs[id]
	g.errs[id] = nil
	if len(errs) != n {
		g.t.Fatalf("worker %d reported %d errors, want %d: %v", id, len(errs), n, errs)
	}
	for _, err := range errs {
		if !errors.Is(err, core.ErrBadInput) || target != nil && !errors.Is(err, target) {
			g.t.Fatalf("worker %d: %v, want bad input matching %v", id, err, target)
		}
	}
}

// wantQuiet checks that no core reported an illegal transition and that
// none waits on anything: no pending user, child, fetch or call.
func (g *group) wantQuiet() {
	g.t.Helper()
	for id, c := range g.cores {
		n := c.Counters()
		if n.Illegal != 0 || n.PendingUsers != 0 || n.PendingChildren != 0 || n.PendingMessages != 0 {
			g.t.Fatalf("worker %d is not quiet: %+v\n%s", id, n, c.Dump())
		}
	}
}

// A hostile member guessing ids gets no value: neither counting up from 1,
// as the ids once were, nor at random, nor next to an id it legitimately
// holds. Nothing it sends attaches to the real values, which are freed the
// moment their real references go.
func TestGuessedIDsGetNothing(t *testing.T) {
	g := newGroup(t) // ids from crypto/rand, as in a real group
	hA, idA, _ := g.remote("shared with A only")
	b := g.cores[wB]
	hB := b.NewLocal([]byte("never shared"))
	idB := b.Handle(hB).RRef
	hM, err := g.cores[wM].Remote(wB, "identity", []byte("M's own"), nil)
	if err != nil {
		t.Fatal(err)
	}
	g.drain(wM)
	g.settle(nil)
	own := g.cores[wM].Handle(hM).RRef

	var guesses []rref.RRefID
	for _, w := range []core.WorkerID{wA, wB, wC, wM} {
		for k := uint64(1); k <= 64; k++ {
			guesses = append(guesses, rref.RRefID{Worker: w, Local: k})
		}
		for d := uint64(1); d <= 32; d++ { // next to the id M holds
			guesses = append(guesses, rref.RRefID{Worker: w, Local: own.Local + d}, rref.RRefID{Worker: w, Local: own.Local - d})
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 5000 {
		guesses = append(guesses, rref.RRefID{Worker: wA, Local: rng.Uint64()}, rref.RRefID{Worker: wB, Local: rng.Uint64()})
	}
	for i, id := range guesses {
		if id == idA || id == idB || id == own {
			t.Fatalf("guess %d hit a real id: the test's generator is not independent", i)
		}
		fork := rref.ForkID{Worker: wM, Local: uint64(i) + 1}
		g.forge(wM, wB, &rref.FetchCall{FetchID: uint64(i) + 1, RRef: id, Fork: fork})
		g.forge(wM, wB, &rref.ForkRequest{RRef: id, Fork: fork, Parent: rref.ForkID{Worker: wC, Local: uint64(i) + 1}})
	}
	g.settle(func(e core.Envelope) bool { return e.To == wM })
	for _, m := range g.inFlight(wB, wM, rref.CodeFetchRet) {
		if r := m.(*rref.FetchRet); r.Error == rref.ErrorKindNone || r.Value != nil {
			t.Fatalf("a guessed id was answered with data: %s", core.FormatMessage(m))
		}
	}
	for _, m := range g.inFlight(wB, wM, rref.CodeForkAck) {
		if a := m.(*rref.ForkAck); a.RRef.Worker == wB && !a.Refused {
			t.Fatalf("a guessed id of the owner's was confirmed: %s", core.FormatMessage(m))
		}
	}
	// What the guesses made B keep, for ids B does not hold, awaits a
	// RemoteCall that never comes: charged to M, bounded, and given up.
	if n := b.Counters(); n.Charged == 0 || n.Charged > core.DefaultPendingPerPeer || n.Illegal != 0 {
		t.Fatalf("after the guesses: %+v", n)
	}
	for range core.DefaultPendingTicks {
		b.Tick()
	}
	g.drain(wB)
	if n := b.Counters(); n.Awaiting != 0 || n.Charged != 0 || n.Owners != 3 {
		t.Fatalf("after expiry: %+v", n)
	}
	g.net = nil // M's answers

	// No guess attached to the real values: each is freed at once when its
	// real reference goes.
	g.wantFreed(wB, 0, "before any release")
	g.release(wA, hA)
	g.settle(nil)
	g.wantFreed(wB, 1, "after A's release")
	g.release(wB, hB)
	g.wantFreed(wB, 2, "after B's release")
	if string(g.freed[wB][0].Value) != "shared with A only" || string(g.freed[wB][1].Value) != "never shared" {
		t.Fatalf("freed %+v", g.freed[wB])
	}
}

// Forged deletes, accepts, fork requests and fetches naming ids the sender
// never received are refused and free nothing early, even when M knows the
// real ids (as a member that snooped them would).
func TestForgedMessagesFreeNothingEarly(t *testing.T) {
	g := newGroup(t, core.WithIDSeed([32]byte{1}))
	hA, id, f0 := g.remote("v")
	forkC := g.pass(wA, wC, hA)
	guess := rref.ForkID{Worker: wM, Local: 12345}
	otherID := rref.RRefID{Worker: wB, Local: 12345}

	g.forge(wM, wB, &rref.UserDelete{RRef: id, Fork: f0}) // A's fork
	g.mustDeliver(wM, wB, rref.CodeUserDelete)
	g.wantErrs(wB, 1, core.ErrForkHeld)
	g.forge(wM, wB, &rref.UserDelete{RRef: id, Fork: guess})
	g.forge(wM, wB, &rref.UserDelete{RRef: otherID, Fork: f0})
	g.forge(wM, wB, &rref.FetchCall{FetchID: 1, RRef: id, Fork: f0})
	g.settle(func(e core.Envelope) bool { return e.From != wM })
	g.wantErrs(wB, 3, nil)
	if r := g.inFlight(wB, wM, rref.CodeFetchRet); len(r) != 1 || r[0].(*rref.FetchRet).Error != rref.ErrorKindBadRequest {
		t.Fatalf("fetch through A's fork: %v", r)
	}
	// A forged accept of C's fork does not unpin A's child.
	g.forge(wM, wA, &rref.ChildAccept{RRef: id, Child: forkC})
	g.forge(wM, wA, &rref.RemoteRet{RRef: id, Fork: f0})
	g.forge(wM, wA, &rref.ForkAck{RRef: id, Fork: f0, Refused: true})
	g.settle(func(e core.Envelope) bool { return e.From != wM })
	g.wantErrs(wA, 3, nil)
	if n := g.cores[wA].Counters(); n.PendingChildren != 1 {
		t.Fatalf("A's child was unpinned by a forged accept: %+v", n)
	}
	// A releases: its delete must wait for the real accept (G2).
	g.release(wA, hA)
	if d := g.inFlight(wA, wB, rref.CodeUserDelete); len(d) != 0 {
		t.Fatal("A sent its delete while its child was pinned")
	}
	g.wantFreed(wB, 0, "after the forgeries")

	// The honest run completes; the value is freed only by C's release.
	g.settle(func(e core.Envelope) bool { return e.To == wM })
	g.wantFreed(wB, 0, "with C holding")
	if g.ran[wC] != 1 || len(g.held[wC]) != 1 {
		t.Fatalf("C ran %d calls holding %d", g.ran[wC], len(g.held[wC]))
	}
	g.release(wC, g.held[wC][0])
	g.settle(func(e core.Envelope) bool { return e.To == wM })
	g.wantFreed(wB, 1, "after C's release")
	g.net = nil
	g.wantQuiet()
}

// Squatting: M sends a ForkRequest for the fork id A minted for C before C
// does. The owner cannot tell which is real, so the first one holds it; the
// other is refused and told so. C is lost rather than pending forever, A is
// unpinned, and the value is freed once A and the squatter have let go (or
// the squatter dies).
func TestSquattedForkID(t *testing.T) {
	for _, end := range []string{"squatter releases", "squatter dies"} {
		t.Run(end, func(t *testing.T) {
			g := newGroup(t, core.WithIDSeed([32]byte{2}))
			hA, id, f0 := g.remote("v")
			forkC := g.pass(wA, wC, hA)
			g.forge(wM, wB, &rref.ForkRequest{RRef: id, Fork: forkC, Parent: f0})
			g.mustDeliver(wM, wB, rref.CodeForkRequest)
			g.wantErrs(wB, 0, nil)
			g.mustDeliver(wA, wC, rref.CodeCall)
			g.mustDeliver(wC, wB, rref.CodeForkRequest)
			g.wantErrs(wB, 1, core.ErrForkHeld)
			if a := g.inFlight(wB, wC, rref.CodeForkAck); len(a) != 1 || !a[0].(*rref.ForkAck).Refused {
				t.Fatalf("the real child was not refused: %v", a)
			}
			g.settle(func(e core.Envelope) bool { return e.To == wM })
			if g.ran[wC] != 1 || g.cores[wC].Handle(g.held[wC][0]).Lost != rref.ErrorKindLost {
				t.Fatalf("C ran %d calls; its handle %+v", g.ran[wC], g.cores[wC].Handle(g.held[wC][0]))
			}
			g.wantQuiet() // nobody waits: not C, not A's pin
			g.release(wC, g.held[wC][0])
			g.release(wA, hA)
			g.settle(func(e core.Envelope) bool { return e.To == wM })
			g.wantFreed(wB, 0, "while the squatter holds the fork")
			if end == "squatter releases" {
				g.forge(wM, wB, &rref.UserDelete{RRef: id, Fork: forkC})
				g.mustDeliver(wM, wB, rref.CodeUserDelete)
			} else {
				g.cores[wB].PeerFailed(wM)
				g.drain(wB)
			}
			g.wantFreed(wB, 1, end)
			g.wantErrs(wB, 0, nil)
			g.net = nil
			g.wantQuiet()
			for id, c := range g.cores {
				if id != wM && !c.Counters().Clean() {
					t.Fatalf("worker %d keeps records:\n%s", id, c.Dump())
				}
			}
		})
	}
}

// The squatter deletes the fork before the real child asks: the child is
// refused (a deleted fork never comes back), and the value lives on for A.
func TestSquattedForkDeletedFirst(t *testing.T) {
	g := newGroup(t, core.WithIDSeed([32]byte{3}))
	hA, id, f0 := g.remote("v")
	forkC := g.pass(wA, wC, hA)
	g.forge(wM, wB, &rref.ForkRequest{RRef: id, Fork: forkC, Parent: f0})
	g.forge(wM, wB, &rref.UserDelete{RRef: id, Fork: forkC})
	g.settle(func(e core.Envelope) bool { return e.From != wM })
	g.settle(func(e core.Envelope) bool { return e.To == wM })
	if a := g.inFlight(wB, wC, rref.CodeForkAck); len(a) != 0 {
		t.Fatalf("acks left in flight: %v", a)
	}
	if g.ran[wC] != 1 || g.cores[wC].Handle(g.held[wC][0]).Lost != rref.ErrorKindLost {
		t.Fatal("the real child was not refused")
	}
	g.wantQuiet()
	g.wantFreed(wB, 0, "with A holding")
	g.cores[wA].Fetch(hA)
	g.drain(wA)
	g.settle(func(e core.Envelope) bool { return e.To == wM })
	if f := g.fetched[wA]; len(f) != 1 || string(f[0].Value) != "v" {
		t.Fatalf("A's fetch: %+v", f)
	}
	g.release(wC, g.held[wC][0])
	g.release(wA, hA)
	g.settle(func(e core.Envelope) bool { return e.To == wM })
	g.wantFreed(wB, 1, "after A's release")
	g.wantQuiet()
}

// The real child asks first: the squatter is refused and told so, and the
// child's reference keeps the value alive.
func TestSquatAfterTheChild(t *testing.T) {
	g := newGroup(t, core.WithIDSeed([32]byte{4}))
	hA, id, f0 := g.remote("v")
	forkC := g.pass(wA, wC, hA)
	g.settle(func(e core.Envelope) bool { return e.To == wM })
	g.forge(wM, wB, &rref.ForkRequest{RRef: id, Fork: forkC, Parent: f0})
	g.forge(wM, wB, &rref.UserDelete{RRef: id, Fork: forkC})
	g.forge(wM, wB, &rref.FetchCall{FetchID: 9, RRef: id, Fork: forkC})
	g.settle(func(e core.Envelope) bool { return e.To == wM })
	g.wantErrs(wB, 3, core.ErrForkHeld)
	if a := g.inFlight(wB, wM, rref.CodeForkAck); len(a) != 1 || !a[0].(*rref.ForkAck).Refused {
		t.Fatalf("the squatter was not refused: %v", a)
	}
	if r := g.inFlight(wB, wM, rref.CodeFetchRet); len(r) != 1 || r[0].(*rref.FetchRet).Value != nil {
		t.Fatalf("the squatter's fetch: %v", r)
	}
	g.net = nil
	g.release(wA, hA)
	g.settle(nil)
	g.wantFreed(wB, 0, "with C holding")
	g.release(wC, g.held[wC][0])
	g.settle(nil)
	g.wantFreed(wB, 1, "after C's release")
	g.wantQuiet()
}

// M, handed the RRef by its creator before the RemoteCall arrived, claims
// the creator's own fork (its parent) as its own. The RemoteCall proves
// whose fork it is: the squatter's delete is refused from then on, and the
// value is freed by the real references only, never early.
func TestSquattedCreatorFork(t *testing.T) {
	g := newGroup(t, core.WithIDSeed([32]byte{5}))
	a := g.cores[wA]
	hA, err := a.Remote(wB, "identity", []byte("v"), nil)
	if err != nil {
		t.Fatal(err)
	}
	g.drain(wA)
	id, f0 := a.Handle(hA).RRef, a.Handle(hA).Fork
	g.pass(wA, wM, hA)
	g.mustDeliver(wA, wM, rref.CodeCall) // M learns f0 as its fork's parent
	g.forge(wM, wB, &rref.ForkRequest{RRef: id, Fork: f0, Parent: rref.ForkID{Worker: wA, Local: 1}})
	g.deliver(func(e core.Envelope) bool {
		r, ok := e.Msg.(*rref.ForkRequest)
		return ok && r.Fork == f0
	})
	g.wantErrs(wB, 0, nil)
	g.mustDeliver(wA, wB, rref.CodeRemoteCall)
	g.wantErrs(wB, 1, core.ErrForkHeld)
	g.forge(wM, wB, &rref.UserDelete{RRef: id, Fork: f0})
	g.deliver(func(e core.Envelope) bool { return e.From == wM && e.Msg.MessageCode() == rref.CodeUserDelete })
	g.wantErrs(wB, 1, core.ErrForkHeld)
	g.settle(nil) // M's own child fork is confirmed, its call runs
	g.release(wM, g.held[wM][0])
	g.settle(nil)
	g.wantFreed(wB, 0, "with A holding")
	a.Fetch(hA)
	g.drain(wA)
	g.settle(nil)
	if f := g.fetched[wA]; len(f) != 1 || string(f[0].Value) != "v" {
		t.Fatalf("A's fetch: %+v", f)
	}
	g.release(wA, hA)
	g.settle(nil)
	g.wantFreed(wB, 1, "after A's release")
	g.wantQuiet()
}

// A child may fetch while its ForkRequest is still in flight: knowing the
// RRef id is the capability, so the owner serves a fork it does not know yet.
func TestFetchOvertakingForkRequestIsServed(t *testing.T) {
	g := newGroup(t, core.WithIDSeed([32]byte{6}))
	hA, _, _ := g.remote("v")
	g.pass(wA, wC, hA)
	g.mustDeliver(wA, wC, rref.CodeCall)
	c := g.cores[wC]
	var h core.HandleID // C's function waits for the owner's ACK: find its handle
	for x := core.HandleID(1); x < 10; x++ {
		if s := c.Handle(x); s.Exists && !s.Confirmed {
			h = x
		}
	}
	c.Fetch(h)
	g.drain(wC)
	g.mustDeliver(wC, wB, rref.CodeFetchCall)
	g.mustDeliver(wB, wC, rref.CodeFetchRet)
	if f := g.fetched[wC]; len(f) != 1 || string(f[0].Value) != "v" {
		t.Fatalf("the fetch overtaking the fork request: %+v", f)
	}
}

// 200k forged fetches (or fork requests) for values not yet created leave
// the owner's tables bounded: past the per-peer bound they are refused and
// answered, an honest peer is still admitted, and everything M made the
// owner keep expires after the pending ticks.
func TestForgedPendingRecordsBounded(t *testing.T) {
	const forged = 200_000
	for _, kind := range []string{"fetch", "fork request"} {
		t.Run(kind, func(t *testing.T) {
			b := core.New(wB, core.WithIDSeed([32]byte{7}))
			rng := rand.New(rand.NewPCG(3, 4))
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			var rd core.Ready
			answers, refusedN := 0, 0
			for i := range forged {
				id := rref.RRefID{Worker: wA, Local: rng.Uint64()}
				fork := rref.ForkID{Worker: wM, Local: rng.Uint64()}
				var err error
				if kind == "fetch" {
					err = b.Deliver(wM, &rref.FetchCall{FetchID: uint64(i), RRef: id, Fork: fork})
				} else {
					err = b.Deliver(wM, &rref.ForkRequest{RRef: id, Fork: fork, Parent: rref.ForkID{Worker: wC, Local: 1}})
				}
				b.TakeReadyInto(&rd)
				answers += len(rd.Messages)
				if err != nil {
					refusedN++
					if !errors.Is(err, core.ErrPendingLimit) || len(rd.Errors) != 1 {
						t.Fatalf("message %d: %v", i, err)
					}
					if len(rd.Messages) != 1 {
						t.Fatalf("refusal %d not answered", i)
					}
				}
			}
			runtime.GC()
			runtime.ReadMemStats(&after)
			t.Logf("%d records kept, %.0f bytes each", core.DefaultPendingPerPeer,
				float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/core.DefaultPendingPerPeer)
			n := b.Counters()
			if n.Owners != core.DefaultPendingPerPeer || n.Awaiting != n.Owners || n.Charged != n.Owners {
				t.Fatalf("tables not bounded: %+v", n)
			}
			if refusedN != forged-core.DefaultPendingPerPeer || n.BadInput != refusedN {
				t.Fatalf("%d refused, counters %+v", refusedN, n)
			}
			// The bound is M's: an honest child's fork request for a value
			// not yet created is still confirmed.
			honest := rref.RRefID{Worker: wA, Local: 42}
			if err := b.Deliver(wC, &rref.ForkRequest{RRef: honest, Fork: rref.ForkID{Worker: wA, Local: 43}, Parent: rref.ForkID{Worker: wA, Local: 44}}); err != nil {
				t.Fatal(err)
			}
			if r := b.TakeReady(); len(r.Messages) != 1 || r.Messages[0].Msg.(*rref.ForkAck).Refused {
				t.Fatalf("an honest peer was refused: %+v", r)
			}
			for range core.DefaultPendingTicks - 1 {
				b.Tick()
			}
			if n := b.Counters(); n.Expired != 0 {
				t.Fatalf("expired early: %+v", n)
			}
			b.Tick()
			r := b.TakeReady()
			n = b.Counters()
			if n.Owners != 0 || n.Awaiting != 0 || n.Charged != 0 || n.Expired != core.DefaultPendingPerPeer+1 {
				t.Fatalf("not expired: %+v", n)
			}
			if kind == "fetch" {
				answers += len(r.Messages)
				for _, e := range r.Messages {
					if f := e.Msg.(*rref.FetchRet); f.Error != rref.ErrorKindLost {
						t.Fatalf("a waiting fetch was answered %s", core.FormatMessage(f))
					}
				}
				if answers != forged {
					t.Fatalf("%d of %d forged fetches answered", answers, forged)
				}
			}
			// M's bound is free again.
			if err := b.Deliver(wM, &rref.FetchCall{FetchID: 1, RRef: rref.RRefID{Worker: wA, Local: 7}}); err != nil {
				t.Fatalf("after expiry: %v", err)
			}
		})
	}
}

// RRefs arriving in calls for values not yet created count against the
// sender's bound too; past it they arrive lost.
func TestForgedHandlesBounded(t *testing.T) {
	b := core.New(wB, core.WithIDSeed([32]byte{8}), core.WithPendingLimit(10))
	var descs []rref.RRefDesc
	for i := range 25 {
		descs = append(descs, rref.RRefDesc{Owner: wB, RRef: rref.RRefID{Worker: wA, Local: uint64(1000 + i)},
			Fork: rref.ForkID{Worker: wM, Local: uint64(i + 1)}, Parent: rref.ForkID{Worker: wM, Local: 999}})
	}
	if err := b.Deliver(wM, &rref.Call{CallID: 1, Function: "f", RRefs: descs}); err != nil {
		t.Fatal(err)
	}
	r := b.TakeReady()
	if len(r.Runs) != 1 || len(r.Errors) != 15 {
		t.Fatalf("%d runs, %d errors", len(r.Runs), len(r.Errors))
	}
	lost := 0
	for _, h := range r.Runs[0].Handles {
		if b.Handle(h).Lost == rref.ErrorKindLost {
			lost++
		}
	}
	if n := b.Counters(); lost != 15 || n.Awaiting != 10 || n.Charged != 10 {
		t.Fatalf("%d lost handles, counters %+v", lost, n)
	}
	for _, h := range r.Runs[0].Handles {
		b.Release(h)
	}
	for range core.DefaultPendingTicks {
		b.Tick()
	}
	if n := b.Counters(); n.Owners != 0 || n.Charged != 0 {
		t.Fatalf("after release and expiry: %+v\n%s", n, b.Dump())
	}
}

// A record that expires is given up as never created: what waited on it is
// answered lost, and its late RemoteCall is refused, so the creator is lost
// rather than pending, what it passed is released, and nothing leaks.
func TestExpiredRecordRefusesLateRemote(t *testing.T) {
	g := newGroup(t, core.WithIDSeed([32]byte{9}))
	a := g.cores[wA]
	x := a.NewLocal([]byte("arg")) // A's own value, passed in the remote
	hA, err := a.Remote(wB, "identity", []byte("v"), []core.HandleID{x})
	if err != nil {
		t.Fatal(err)
	}
	g.drain(wA)
	g.pass(wA, wC, hA)
	late := func(e core.Envelope) bool { return e.Msg.MessageCode() == rref.CodeRemoteCall }
	g.settle(late) // C's fork request overtakes the RemoteCall, C runs
	hC := g.held[wC][0]
	g.cores[wC].Fetch(hC)
	g.drain(wC)
	g.settle(late) // the fetch waits on B
	b := g.cores[wB]
	for range core.DefaultPendingTicks {
		b.Tick()
	}
	g.drain(wB)
	g.settle(late)
	if f := g.fetched[wC]; len(f) != 1 || f[0].Err != rref.ErrorKindLost {
		t.Fatalf("C's waiting fetch: %+v", f)
	}
	if n := b.Counters(); n.Expired != 1 || n.Owners != 0 {
		t.Fatalf("after expiry: %+v", n)
	}
	g.mustDeliver(wA, wB, rref.CodeRemoteCall)
	g.settle(nil)
	if g.ran[wB] != 0 || len(g.freed[wB]) != 0 {
		t.Fatal("the late RemoteCall created the value")
	}
	if s := a.Handle(hA); s.Lost != rref.ErrorKindLost {
		t.Fatalf("A's handle after the refusal: %+v", s)
	}
	g.release(wA, hA)
	g.release(wC, hC)
	g.release(wA, x)
	g.settle(nil)
	g.wantFreed(wA, 1, "A's argument, released by B")
	g.wantQuiet()
	for id, c := range g.cores {
		if n := c.Counters(); !n.Clean() || n.Illegal != 0 || n.BadInput != 0 {
			t.Fatalf("worker %d: %+v\n%s", id, n, c.Dump())
		}
	}
}

// Short of the expiry, a RemoteCall overtaken by a fork request creates the
// value as always.
func TestAwaitingRecordWithinExpiry(t *testing.T) {
	g := newGroup(t, core.WithIDSeed([32]byte{10}))
	hA, err := g.cores[wA].Remote(wB, "identity", []byte("v"), nil)
	if err != nil {
		t.Fatal(err)
	}
	g.drain(wA)
	g.pass(wA, wC, hA)
	late := func(e core.Envelope) bool { return e.Msg.MessageCode() == rref.CodeRemoteCall }
	g.settle(late)
	for range core.DefaultPendingTicks - 1 {
		g.cores[wB].Tick()
	}
	g.settle(nil)
	if n := g.cores[wB].Counters(); n.Expired != 0 || n.Owners != 1 || n.Forks != 2 || n.Charged != 0 {
		t.Fatalf("%+v", n)
	}
	g.release(wA, hA)
	g.release(wC, g.held[wC][0])
	g.settle(nil)
	g.wantFreed(wB, 1, "after both releases")
	g.wantQuiet()
}

// Ids are 64 random bits: two workers' generators (from crypto/rand) never
// agree, one worker's ids are not a sequence, and a seeded core mints the
// same ids on every run.
func TestIDsAreUnguessable(t *testing.T) {
	mint := func(c *core.Core, n int) []uint64 {
		var out []uint64
		for range n {
			out = append(out, c.Handle(c.NewLocal(nil)).RRef.Local)
		}
		return out
	}
	x, y := mint(core.New(1), 1000), mint(core.New(1), 1000)
	if slices.Equal(x, y) {
		t.Fatal("two cores seeded from crypto/rand minted the same ids")
	}
	seen := map[uint64]bool{}
	small := 0
	for _, v := range x {
		if seen[v] {
			t.Fatalf("id %d minted twice", v)
		}
		seen[v] = true
		if v < 1<<48 {
			small++ // 1000 draws land below 2^48 with probability 2^-6 in all
		}
	}
	if small > 1 {
		t.Fatalf("%d of 1000 ids below 2^48: not 64 random bits", small)
	}
	s1 := mint(core.New(1, core.WithIDSeed([32]byte{42})), 100)
	s2 := mint(core.New(1, core.WithIDSeed([32]byte{42})), 100)
	if !slices.Equal(s1, s2) {
		t.Fatal("a seeded core is not deterministic")
	}
	if fmt.Sprint(s1[:3]) == fmt.Sprint(x[:3]) {
		t.Fatal("the seeded and the random core agree")
	}
}
