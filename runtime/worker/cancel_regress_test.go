package worker_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rrefkit/rref/internal/hooks"
	"github.com/rrefkit/rref/runtime/worker"
)

// waitFn registers "wait": it blocks until its ctx ends (or 5 s), and
// reports on ended whether its context was cancelled.
// waitFn registers "wait", which reports on started once it runs and on
// ended how it ended, and "relay", which calls wait on another worker.
func waitFn(started chan struct{}, ended chan error) func(w *worker.Worker) {
	return func(w *worker.Worker) {
		worker.Register(w, "wait", func(ctx context.Context, x int) (int, error) {
			started <- struct{}{}
			select {
			case <-ctx.Done():
				ended <- ctx.Err()
			case <-time.After(5 * time.Second):
				ended <- nil
			}
			return 0, ctx.Err()
		})
		worker.Register(w, "relay", func(ctx context.Context, to string) (int, error) {
			return worker.Call[int](ctx, w, to, "wait", 0)
		})
	}
}

func TestReviewCancelSelfCall(t *testing.T) {
	started, ended := make(chan struct{}, 4), make(chan error, 4)
	ws, err := worker.NewGroup([]string{"A", "B"}, worker.Config{Setup: waitFn(started, ended), CallTimeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer worker.ShutdownGroup(context.Background(), ws)
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-started
		cancel()
	}()
	worker.Call[int](ctx, ws[0], "A", "wait", 0)
	if e := <-ended; e == nil {
		t.Fatal("a call to self was not cancelled")
	}
}

func TestReviewCancelNestedAndGo(t *testing.T) {
	started, ended := make(chan struct{}, 4), make(chan error, 4)
	ws, err := worker.NewGroup([]string{"A", "B", "C"}, worker.Config{Setup: waitFn(started, ended), CallTimeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer worker.ShutdownGroup(context.Background(), ws)
	ctx, cancel := context.WithCancel(context.Background())
	f := worker.Go[int](ctx, ws[0], "B", "relay", "C")
	<-started // the nested call reached C: the cancellation must travel two hops
	cancel()
	f.Wait(context.Background())
	if e := <-ended; e == nil {
		t.Fatal("the nested callee was not cancelled")
	}
	// a deadline travels through the relay
	dctx, dcancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer dcancel()
	start := time.Now()
	worker.Call[int](dctx, ws[0], "B", "relay", "C")
	if e := <-ended; e == nil || time.Since(start) > 3*time.Second {
		t.Fatal("the nested callee did not get the deadline")
	}
}

// With messages reordered (the protocol assumes no delivery order: the
// jitter hook), a CallCancel that overtakes its Call is remembered, and
// the call, when it comes, does not run (it used to run on, uncancelled,
// until the caller's CallTimeout).
func TestReviewCancelOvertakingCallIsLost(t *testing.T) {
	var started atomic.Int64
	ended := make(chan error, 1)
	setup := func(w *worker.Worker) {
		worker.Register(w, "wait", func(ctx context.Context, x int) (int, error) {
			started.Add(1)
			select {
			case <-ctx.Done():
				ended <- ctx.Err()
			case <-time.After(5 * time.Second):
				ended <- nil
			}
			return 0, ctx.Err()
		})
	}
	cfg := worker.Config{Setup: setup, CallTimeout: 20 * time.Second}
	var n atomic.Int64
	hooks.WorkerJitter(&cfg, func() time.Duration {
		if n.Add(1) == 1 {
			return 300 * time.Millisecond // the first message: the Call
		}
		return 0
	})
	ws, err := worker.NewGroup([]string{"A", "B"}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer worker.ShutdownGroup(context.Background(), ws)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	worker.Call[int](ctx, ws[0], "B", "wait", 0)
	// The cancel and then the call reach B; B answers the call cancelled.
	waitUntil(t, func() bool { return ws[0].DebugInfo().PendingCalls == 0 && ws[1].DebugInfo().MessagesReceived >= 2 })
	waitUntil(t, func() bool { return ws[0].DebugInfo().Counters.PendingMessages == 0 })
	if started.Load() > 0 {
		if e := <-ended; e == nil {
			t.Fatal("the callee ran on uncancelled: the CallCancel that overtook the Call was dropped")
		}
	}
}
