package worker_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rrefkit/rref/runtime/worker"
)

// A function that exists but whose own nested call hit an unknown function
// must not be reported to its caller as itself being unknown.
func TestReviewNestedUnknownFunctionBlamesOuter(t *testing.T) {
	ctx := context.Background()
	setup := func(w *worker.Worker) {
		worker.Register(w, "outer", func(ctx context.Context, x int) (int, error) {
			return worker.Call[int](ctx, w, "C", "missing", x)
		})
	}
	ws, err := worker.NewGroup([]string{"A", "B", "C"}, worker.Config{Setup: setup})
	if err != nil {
		t.Fatal(err)
	}
	defer worker.ShutdownGroup(context.Background(), ws)
	_, err = worker.Call[int](ctx, ws[0], "B", "outer", 1)
	if err == nil {
		t.Fatal("no error")
	}
	if !strings.Contains(err.Error(), "missing") {
		t.Errorf("A's error names the registered function outer as unknown and loses the real one: %v", err)
	}
}

// A Remote whose function fails with a context deadline: ToHere's error
// should match context.DeadlineExceeded (as it did on the callee) and keep
// the function's message, not turn into ErrTimeout (RemoteTimeout's error).
func TestReviewRemoteDeadlineBecomesErrTimeout(t *testing.T) {
	ctx := context.Background()
	setup := func(w *worker.Worker) {
		worker.Register(w, "slow", func(ctx context.Context, x int) (int, error) {
			c, cancel := context.WithTimeout(ctx, time.Millisecond)
			defer cancel()
			<-c.Done()
			return 0, errors.Join(errors.New("db query"), c.Err())
		})
	}
	ws, err := worker.NewGroup([]string{"A", "B"}, worker.Config{Setup: setup})
	if err != nil {
		t.Fatal(err)
	}
	defer worker.ShutdownGroup(context.Background(), ws)
	r, err := worker.Remote[int](ctx, ws[0], "B", "slow", 1)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Release()
	_, err = r.ToHere(ctx)
	if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, worker.ErrTimeout) || !strings.Contains(err.Error(), "db query") {
		t.Errorf("ToHere of a Remote whose function hit a deadline: %v (Is DeadlineExceeded %v, Is ErrTimeout %v)",
			err, errors.Is(err, context.DeadlineExceeded), errors.Is(err, worker.ErrTimeout))
	}
}

// A value whose Remote failed is reported by LeakError as "(not yet
// created)", as if its function were still running.
func TestReviewLeakErrorFailedRemoteSaysNotYetCreated(t *testing.T) {
	ctx := context.Background()
	setup := func(w *worker.Worker) {
		worker.Register(w, "fail", func(ctx context.Context, x int) (int, error) { return 0, errors.New("boom") })
	}
	ws, err := worker.NewGroup([]string{"A", "B"}, worker.Config{Setup: setup})
	if err != nil {
		t.Fatal(err)
	}
	r, err := worker.Remote[int](ctx, ws[0], "B", "fail", 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.ToHere(ctx); err == nil {
		t.Fatal("no failure")
	}
	sctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	err = worker.ShutdownGroup(sctx, ws)
	if err == nil {
		t.Fatal("no leak")
	}
	if strings.Contains(err.Error(), "not yet created") {
		t.Errorf("a value whose function failed is reported as not yet created:\n%v", err)
	}
	r.Release()
}

// A nil entry in Config.Errors makes every call that returns a registered
// error panic on the caller.
func TestReviewNilRegisteredErrorPanics(t *testing.T) {
	errApp := errors.New("app")
	setup := func(w *worker.Worker) {
		worker.Register(w, "f", func(ctx context.Context, x int) (int, error) { return 0, errApp })
	}
	ws, err := worker.NewGroup([]string{"A", "B"}, worker.Config{Setup: setup, Errors: []error{nil, errApp}})
	if err != nil {
		return // refusing the config is fine
	}
	defer worker.ShutdownGroup(context.Background(), ws)
	defer func() {
		if p := recover(); p != nil {
			t.Errorf("the caller panicked: %v", p)
		}
	}()
	worker.Call[int](context.Background(), ws[0], "B", "f", 1)
}
