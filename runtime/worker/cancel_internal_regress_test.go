package worker

import (
	"context"
	"testing"

	"github.com/rrefkit/rref/runtime/core"
)

// A peer that sends two Calls with one call id (the core hands out both
// runs) gets a context for each: both end when their runs are answered.
// (The second overwrote the first in w.calling: the first answer ended the
// second run's context, and the first's, its Done asked for, never ended.)
func TestReviewDuplicateCallIDLeaksContext(t *testing.T) {
	w := &Worker{calling: map[callKey]*callCtx{}}
	run := core.Run{Kind: core.RunCall, From: 2, CallID: 5}
	w.trackCalls(&core.Ready{Runs: []core.Run{run}})
	first := w.callContext(context.Background(), run)
	done := first.Done()
	w.trackCalls(&core.Ready{Runs: []core.Run{run}}) // the same call id again
	second := w.callContext(context.Background(), run)
	_ = second.Done()
	w.endCall(run, first) // both runs answered
	w.endCall(run, second)
	select {
	case <-done:
	default:
		t.Fatal("the first run's context never ended after both runs were answered")
	}
	if first == second || len(w.calling) != 0 {
		t.Fatalf("two runs of one id share a context (%v) or are still recorded (%d)", first == second, len(w.calling))
	}
}

// Three calls with one id, answered middle first, then last, then first:
// each is unchained from wherever it sits, each later claim finds the next
// unclaimed context, and nothing stays recorded.
func TestRepeatedCallIDsUnchainInAnyOrder(t *testing.T) {
	w := &Worker{calling: map[callKey]*callCtx{}}
	run := core.Run{Kind: core.RunCall, From: 2, CallID: 9}
	var cs []*callCtx
	for range 3 {
		w.trackCalls(&core.Ready{Runs: []core.Run{run}})
		cs = append(cs, w.callContext(context.Background(), run))
	}
	if cs[0] == cs[1] || cs[1] == cs[2] || cs[0] == cs[2] {
		t.Fatal("two calls of one id were given one context")
	}
	for _, i := range []int{1, 2, 0} {
		w.endCall(run, cs[i])
		if cs[i].Err() == nil {
			t.Fatalf("call %d's context did not end with its answer", i)
		}
		for x := w.calling[callKey{2, 9}]; x != nil; x = x.next {
			if x == cs[i] {
				t.Fatalf("call %d answered but still chained", i)
			}
		}
	}
	if len(w.calling) != 0 {
		t.Fatalf("%d keys still recorded", len(w.calling))
	}
}
