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
