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
