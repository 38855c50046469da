package core_test

import (
	"testing"

	"github.com/rrefkit/rref/generated/rref"
	"github.com/rrefkit/rref/runtime/core"
)

// refOf is the inventory's reference of fork f, or fails the test.
func refOf(t *testing.T, c *core.Core, f rref.ForkID) core.ReferenceEntry {
	t.Helper()
	for _, r := range c.Inventory().References {
		if r.Fork == f {
			return r
		}
	}
	t.Fatalf("no reference %v in %+v", f, c.Inventory().References)
	return core.ReferenceEntry{}
}

// TestInventoryFollowsTheMachines: the inventory of an owner and its users
// says what each machine is in at each step of a fork from one user to
// another (pending, pinned, confirmed), a release whose delete waits for
// a pin, a refused fork (lost) and an owner's death (orphaned, and a cut
// handle once the record is gone); Held, the LeakError's view of it, keeps
// only what is held.
func TestInventoryFollowsTheMachines(t *testing.T) {
	a, b, h, id, fork := pair(t)
	c := core.New(3)

	inv := b.Inventory()
	if len(inv.Values) != 1 || inv.Values[0].RRef != id || inv.Values[0].State != rref.OwnerReady || string(inv.Values[0].Value) != "v" ||
		len(inv.Values[0].Forks) != 1 || inv.Values[0].Forks[0] != (core.ForkEntry{Fork: fork, Holder: 1}) {
		t.Fatalf("owner's inventory: %+v", inv)
	}
	if r := refOf(t, a, fork); r.State != rref.UserConfirmed || r.Handle != h || r.Owner != 2 || r.Pinned != 0 {
		t.Fatalf("creator's confirmed reference: %+v", r)
	}

	// A lends a copy to C: A pins it, C's is pending until B answers.
	if _, err := a.Call(3, "keep", nil, []core.HandleID{h}); err != nil {
		t.Fatal(err)
	}
	call := a.TakeReady().Messages[0].Msg.(*rref.Call)
	child := call.RRefs[0].Fork
	if r := refOf(t, a, fork); r.Pinned != 1 {
		t.Fatalf("lender's reference with a child in flight: %+v", r)
	}
	if pins := a.Inventory().Pins; len(pins) != 1 || pins[0].Child != child || pins[0].To != 3 || pins[0].Parent != fork {
		t.Fatalf("lender's pins: %+v", pins)
	}
	c.Deliver(1, call)
	req := c.TakeReady().Messages[0].Msg.(*rref.ForkRequest)
	if r := refOf(t, c, child); r.State != rref.UserPending || r.Parent != fork || r.ParentWorker != 1 || r.Runs != 1 || r.Handle == 0 {
		t.Fatalf("receiver's pending reference: %+v", r)
	}

	// A releases while the child is pinned: its record stays, unheld.
	a.Release(h)
	if r := refOf(t, a, fork); r.State != rref.UserDraining || r.Handle != 0 || r.Pinned != 1 {
		t.Fatalf("released reference with a pinned child: %+v", r)
	}
	if held := a.Held(); len(held) != 2 || held[0].Kind != core.HeldReference || held[1].Kind != core.HeldPin || held[1].To != 3 {
		t.Fatalf("Held of a released, pinned reference: %+v", held)
	}

	// B refuses C's fork (as it would a freed value's): C's copy is lost.
	c.Deliver(2, &rref.ForkAck{RRef: id, Fork: req.Fork, Refused: true})
	c.TakeReady()
	if r := refOf(t, c, child); r.State != rref.UserLost || r.Cut != rref.ErrorKindLost {
		t.Fatalf("refused fork: %+v", r)
	}
	if held := c.Held(); len(held) != 0 {
		t.Fatalf("Held lists a lost reference: %+v", held)
	}

	// B dies: A's reference is orphaned; a reference whose record is
	// dropped (nothing pins it) is a cut handle, kept by its handle alone.
	b2 := core.New(2)
	h2 := b2.NewLocal([]byte("w"))
	if _, err := b2.Call(1, "take", nil, []core.HandleID{h2}); err != nil {
		t.Fatal(err)
	}
	give := b2.TakeReady().Messages[0].Msg.(*rref.Call)
	d := core.New(1)
	d.Deliver(2, give)
	d.TakeReady()
	got := refOf(t, d, give.RRefs[0].Fork)
	if got.State != rref.UserConfirmed || got.Parent != rref.ForkID(give.RRefs[0].RRef) {
		t.Fatalf("a copy the owner handed out: %+v", got)
	}
	d.PeerFailed(2)
	d.TakeReady()
	if r := refOf(t, d, give.RRefs[0].Fork); r.State != rref.UserOrphaned || r.Cut != rref.ErrorKindOwnerFailed || r.Handle != got.Handle {
		t.Fatalf("reference whose owner died: %+v", r)
	}
	if v := b2.Inventory().Values; len(v) != 1 || v[0].Local != 1 || len(v[0].Handles) != 1 || v[0].Handles[0] != h2 || len(v[0].Forks) != 1 {
		t.Fatalf("an owner's program handle and its fork lent: %+v", v)
	}
}
