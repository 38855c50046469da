package core_test

import (
	"testing"

	"github.com/rrefkit/rref/generated/rref"
	"github.com/rrefkit/rref/runtime/core"
)

// A CallCancel delivered before its Call (delivery order is not assumed)
// is remembered: the Call is handed out cancelled. (It was forgotten, and
// the call ran as if never cancelled.)
func TestReviewCancelBeforeCallIsForgotten(t *testing.T) {
	c := core.New(2)
	c.Deliver(1, &rref.CallCancel{CallID: 5})
	c.TakeReady()
	c.Deliver(1, &rref.Call{CallID: 5, Function: "f"})
	r := c.TakeReady()
	if len(r.Runs) != 1 || !r.Runs[0].Cancelled {
		t.Fatalf("a Call whose cancel arrived first runs uncancelled: %+v", r.Runs)
	}
}

// TestCallTimeoutAtItsLimits: a Call's timeout past the largest duration
// (a hostile or broken peer) is no deadline, not a negative one; the
// largest duration itself stays positive.
func TestCallTimeoutAtItsLimits(t *testing.T) {
	c := core.New(2)
	for _, tc := range []struct {
		ns   uint64
		want bool // a positive deadline
	}{{^uint64(0), false}, {1 << 63, false}, {1<<63 - 1, true}, {0, false}, {1, true}} {
		c.Deliver(1, &rref.Call{CallID: tc.ns + 7, Function: "f", Timeout: tc.ns})
		r := c.TakeReady()
		if len(r.Runs) != 1 || (r.Runs[0].Timeout > 0) != tc.want || r.Runs[0].Timeout < 0 {
			t.Errorf("timeout %d ns: runs %+v", tc.ns, r.Runs)
		}
	}
}

// TestEarlyCancelsAreBounded: a peer flooding cancels for calls it never
// makes fills at most DefaultEarlyCancels entries; the newest still counts.
func TestEarlyCancelsAreBounded(t *testing.T) {
	c := core.New(2)
	n := uint64(core.DefaultEarlyCancels) * 4
	for id := uint64(1); id <= n; id++ {
		c.Deliver(1, &rref.CallCancel{CallID: id})
		c.TakeReady()
	}
	c.Deliver(1, &rref.Call{CallID: n, Function: "f"})
	if r := c.TakeReady(); len(r.Runs) != 1 || !r.Runs[0].Cancelled {
		t.Fatalf("the newest early cancel was forgotten: %+v", r.Runs)
	}
	c.Deliver(1, &rref.Call{CallID: 1, Function: "f"})
	if r := c.TakeReady(); len(r.Runs) != 1 || r.Runs[0].Cancelled {
		t.Fatalf("the oldest early cancel was kept past the bound: %+v", r.Runs)
	}
}

// A cancel sent because the caller's deadline passed says so
// (CancelCallPastDeadline), and the callee's driver learns it whichever
// way the cancel reaches it: for a call it runs, before the call, or while
// the call waits for its RRef argument's confirmation. A plain cancel
// says it was not.
func TestCancelPastDeadlineTravels(t *testing.T) {
	a, b, h, _, _ := pair(t) // a holds a confirmed UserRRef owned by b
	id, err := a.CallWithin(3, "f", nil, []core.HandleID{h}, 0)
	if err != nil {
		t.Fatal(err)
	}
	call := a.TakeReady().Messages[0].Msg.(*rref.Call)
	a.CancelCall(id)
	if m := a.TakeReady().Messages[0].Msg.(*rref.CallCancel); m.Deadline {
		t.Fatalf("a plain cancel says the deadline passed: %+v", m)
	}
	a.CancelCallPastDeadline(id)
	cancel := a.TakeReady().Messages[0].Msg.(*rref.CallCancel)
	if !cancel.Deadline || cancel.CallID != id {
		t.Fatalf("the cancel sent: %+v, want CallCancel{call=%d deadline=true}", cancel, id)
	}

	// Waiting for its argument's confirmation.
	c := core.New(3)
	c.Deliver(1, call)
	var forkReq *rref.ForkRequest
	for _, m := range c.TakeReady().Messages {
		if fr, ok := m.Msg.(*rref.ForkRequest); ok {
			forkReq = fr
		}
	}
	c.Deliver(1, cancel)
	c.TakeReady()
	b.Deliver(3, forkReq)
	c.Deliver(2, b.TakeReady().Messages[0].Msg)
	if r := c.TakeReady(); len(r.Runs) != 1 || !r.Runs[0].Cancelled || !r.Runs[0].PastDeadline {
		t.Fatalf("a pending call cancelled past its deadline runs as %+v", r.Runs)
	}

	// Running, and not yet arrived.
	c = core.New(2)
	c.Deliver(1, &rref.Call{CallID: 5, Function: "f"})
	c.TakeReady()
	c.Deliver(1, &rref.CallCancel{CallID: 5, Deadline: true})
	if r := c.TakeReady(); len(r.Cancels) != 1 || !r.Cancels[0].Deadline {
		t.Fatalf("the cancel of a running call: %+v, want one past its deadline", r.Cancels)
	}
	c.Deliver(1, &rref.CallCancel{CallID: 6, Deadline: true})
	c.TakeReady()
	c.Deliver(1, &rref.Call{CallID: 6, Function: "f"})
	if r := c.TakeReady(); len(r.Runs) != 1 || !r.Runs[0].Cancelled || !r.Runs[0].PastDeadline {
		t.Fatalf("a call whose deadline cancel came first: %+v, want it run cancelled past its deadline", r.Runs)
	}
	c.Deliver(1, &rref.CallCancel{CallID: 7})
	c.TakeReady()
	c.Deliver(1, &rref.Call{CallID: 7, Function: "f"})
	if r := c.TakeReady(); len(r.Runs) != 1 || !r.Runs[0].Cancelled || r.Runs[0].PastDeadline {
		t.Fatalf("a call whose plain cancel came first: %+v", r.Runs)
	}
}
