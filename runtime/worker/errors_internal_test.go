package worker

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/rrefkit/rref/generated/rref"
	"github.com/rrefkit/rref/runtime/core"
)

// TestFailuresRoundTrip: what failureOf sends, remoteError turns back into
// the same sentinel or registered error; a code the receiving worker did
// not register arrives as a code with nothing to match.
func TestFailuresRoundTrip(t *testing.T) {
	errApp := errors.New("app: gone")
	callee := &Worker{cfg: Config{Errors: []error{errApp}}, name: "B", names: []string{"A", "B"}}
	caller := &Worker{cfg: Config{Errors: []error{errApp}}, name: "A", names: []string{"A", "B"}}
	stranger := &Worker{name: "A", names: []string{"A", "B"}}
	for _, tc := range []struct {
		err  error
		kind rref.ErrorKind
		is   error
	}{
		{&localFailure{rref.ErrorKindUnknownFunction, fmt.Errorf("%w %q on B", ErrUnknownFunction, "f")}, rref.ErrorKindUnknownFunction, ErrUnknownFunction},
		{&localFailure{rref.ErrorKindCodec, fmt.Errorf("%w: 3 bytes", ErrCodec)}, rref.ErrorKindCodec, ErrCodec},
		{fmt.Errorf("slow: %w", context.DeadlineExceeded), rref.ErrorKindDeadlineExceeded, context.DeadlineExceeded},
		{fmt.Errorf("stopped: %w", context.Canceled), rref.ErrorKindCancelled, context.Canceled},
		{fmt.Errorf("row 7: %w", errApp), rref.ErrorKindUser, errApp},
	} {
		f := callee.failureOf(tc.err)
		if f.Kind != tc.kind {
			t.Errorf("%v sent as %v, want %v", tc.err, f.Kind, tc.kind)
		}
		if back := caller.remoteError(f.Kind, f.Code, f.Message, "f", "B"); !errors.Is(back, tc.is) {
			t.Errorf("%v came back as %v, which is not %v", tc.err, back, tc.is)
		}
	}
	// A function's own error that wraps a sentinel from a call it made is
	// its own failure, not the sentinel's kind: its caller's function exists.
	nested := callee.failureOf(fmt.Errorf("lookup: %w", fmt.Errorf("%w: missing on C", ErrUnknownFunction)))
	if nested.Kind != rref.ErrorKindUser || !strings.Contains(nested.Message, "missing on C") {
		t.Errorf("a nested unknown function sent as %+v", nested)
	}
	f := callee.failureOf(fmt.Errorf("row 7: %w", errApp))
	back := stranger.remoteError(f.Kind, f.Code, f.Message, "f", "B")
	var ue *UserError
	if !errors.As(back, &ue) || ue.Code != errApp.Error() || errors.Is(back, errApp) {
		t.Errorf("to a worker that did not register it: %v (%+v)", back, ue)
	}
	if f := callee.failureOf(nil); f != (core.Failure{}) {
		t.Errorf("success sent as %+v", f)
	}
}

// TestCancelsNameOnlyTheirSendersCalls: a cancel from one peer for another
// peer's call id cancels nothing; one for its own running call ends its
// context, once; one that arrives before the function runs is kept; a
// call's deadline and its end are seen with or without Done asked for.
func TestCancelsNameOnlyTheirSendersCalls(t *testing.T) {
	w := &Worker{calling: map[callKey]*callCtx{}}
	run := core.Run{Kind: core.RunCall, From: 2, CallID: 5}
	w.trackCalls(&core.Ready{Runs: []core.Run{run}})
	w.trackCalls(&core.Ready{Cancels: []core.Cancel{{From: 3, CallID: 5}}})
	ctx := w.callContext(context.Background(), run)
	if ctx.Err() != nil {
		t.Fatal("another peer's cancel reached the call")
	}
	done := ctx.Done()
	w.trackCalls(&core.Ready{Cancels: []core.Cancel{{From: 2, CallID: 5}, {From: 2, CallID: 5}}})
	<-done
	if ctx.Err() != context.Canceled {
		t.Fatalf("the caller's cancel: %v", ctx.Err())
	}
	early := core.Run{Kind: core.RunCall, From: 2, CallID: 6}
	w.trackCalls(&core.Ready{Runs: []core.Run{early}, Cancels: []core.Cancel{{From: 2, CallID: 6}}})
	if ctx := w.callContext(context.Background(), early); ctx.Err() != context.Canceled {
		t.Fatalf("a cancel before the function ran: %v", ctx.Err())
	}
	pending := core.Run{Kind: core.RunCall, From: 2, CallID: 7, Cancelled: true}
	w.trackCalls(&core.Ready{Runs: []core.Run{pending}})
	if ctx := w.callContext(context.Background(), pending); ctx.Err() != context.Canceled {
		t.Fatalf("a run the core handed out cancelled: %v", ctx.Err())
	}
	timed := core.Run{Kind: core.RunCall, From: 2, CallID: 8, Timeout: time.Millisecond}
	w.trackCalls(&core.Ready{Runs: []core.Run{timed}})
	tctx := w.callContext(context.Background(), timed)
	if _, ok := tctx.Deadline(); !ok {
		t.Fatal("no deadline")
	}
	<-tctx.Done()
	if tctx.Err() != context.DeadlineExceeded {
		t.Fatalf("past its deadline: %v", tctx.Err())
	}
	lazy := core.Run{Kind: core.RunCall, From: 2, CallID: 9, Timeout: time.Millisecond}
	w.trackCalls(&core.Ready{Runs: []core.Run{lazy}})
	lctx := w.callContext(context.Background(), lazy)
	time.Sleep(5 * time.Millisecond)
	if lctx.Err() != context.DeadlineExceeded { // no Done asked for: no timer ran
		t.Fatalf("past its deadline, never waited on: %v", lctx.Err())
	}
	parent, cancelParent := context.WithCancel(context.Background())
	closing := core.Run{Kind: core.RunCall, From: 2, CallID: 10}
	w.trackCalls(&core.Ready{Runs: []core.Run{closing}})
	pctx := w.callContext(parent, closing)
	pdone := pctx.Done()
	cancelParent()
	<-pdone
	for _, rc := range []struct {
		r core.Run
		c *callCtx
	}{{run, ctx}, {timed, tctx}, {lazy, lctx}, {closing, pctx}, {early, w.calling[callKey{2, 6}]}, {pending, w.calling[callKey{2, 7}]}} {
		w.endCall(rc.r, rc.c)
	}
	if len(w.calling) != 0 {
		t.Errorf("%d calls still recorded", len(w.calling))
	}
	if ctx.Err() == nil {
		t.Error("an answered call's context has not ended")
	}
}

// TestCallDeadlineIsTheCallersTimeLeft: a call's context reports the time
// the caller had left, counted from when the call was handed out, and the
// parent's deadline where it comes first.
func TestCallDeadlineIsTheCallersTimeLeft(t *testing.T) {
	w := &Worker{calling: map[callKey]*callCtx{}}
	run := core.Run{Kind: core.RunCall, From: 2, CallID: 1, Timeout: time.Hour}
	before := time.Now()
	w.trackCalls(&core.Ready{Runs: []core.Run{run}})
	after := time.Now()
	ctx := w.callContext(context.Background(), run)
	d, ok := ctx.Deadline()
	if !ok || d.Before(before.Add(time.Hour)) || d.After(after.Add(time.Hour)) {
		t.Fatalf("deadline %v, %v; want between %v and %v", d, ok, before.Add(time.Hour), after.Add(time.Hour))
	}
	if ctx.Err() != nil {
		t.Fatalf("an hour early: %v", ctx.Err())
	}
	soon := time.Now().Add(time.Minute)
	parent, cancel := context.WithDeadline(context.Background(), soon)
	defer cancel()
	run.CallID = 2
	w.trackCalls(&core.Ready{Runs: []core.Run{run}})
	if d, ok := w.callContext(parent, run).Deadline(); !ok || !d.Equal(soon) {
		t.Fatalf("under a parent due in a minute: %v, %v", d, ok)
	}
	run.CallID, run.Timeout = 3, time.Second
	w.trackCalls(&core.Ready{Runs: []core.Run{run}})
	late := time.Now().Add(time.Hour)
	lparent, lcancel := context.WithDeadline(context.Background(), late)
	defer lcancel()
	if d, ok := w.callContext(lparent, run).Deadline(); !ok || !d.Before(late) {
		t.Fatalf("a parent due later does not move the call's deadline: %v, %v", d, ok)
	}
}

// TestCallDeadlineFarAwayDoesNotWrap: a time left at the largest Duration
// (a caller's deadline centuries away: time.Until saturates there, or a
// peer that says so) is a deadline far away, not one past: the call runs.
func TestCallDeadlineFarAwayDoesNotWrap(t *testing.T) {
	w := &Worker{calling: map[callKey]*callCtx{}}
	run := core.Run{Kind: core.RunCall, From: 2, CallID: 1, Timeout: math.MaxInt64}
	w.trackCalls(&core.Ready{Runs: []core.Run{run}})
	ctx := w.callContext(context.Background(), run)
	if err := ctx.Err(); err != nil {
		t.Fatalf("a deadline centuries away: %v", err)
	}
	if d, ok := ctx.Deadline(); !ok || !d.After(time.Now().Add(100*365*24*time.Hour)) {
		t.Fatalf("deadline %v, %v; want centuries away", d, ok)
	}
	select {
	case <-ctx.Done():
		t.Fatal("done at once")
	case <-time.After(10 * time.Millisecond):
	}
}
