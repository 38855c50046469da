package worker_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/rrefkit/rref/runtime/worker"
)

var (
	errNotFound = errors.New("app: not found")
	errConflict = errors.New("app: conflict")
)

// picky refuses to decode a negative value: a decode failure on the
// callee, where the caller's encoding succeeded.
type picky struct{ V int }

func (p *picky) UnmarshalJSON(b []byte) error {
	var v struct{ V int }
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	if v.V < 0 {
		return fmt.Errorf("negative %d", v.V)
	}
	p.V = v.V
	return nil
}

func errorGroup(t *testing.T) []*worker.Worker {
	t.Helper()
	setup := func(w *worker.Worker) {
		worker.Register(w, "find", func(ctx context.Context, x int) (int, error) {
			switch x {
			case 1:
				return 0, fmt.Errorf("key %d: %w", x, errNotFound)
			case 2:
				return 0, errConflict
			}
			return 0, errors.New("plain failure")
		})
		worker.Register(w, "picky", func(ctx context.Context, p picky) (int, error) { return p.V, nil })
	}
	ws, err := worker.NewGroup([]string{"A", "B"}, worker.Config{Setup: setup, Codec: worker.JSON,
		Errors: []error{errNotFound, errConflict}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { worker.ShutdownGroup(context.Background(), ws) })
	return ws
}

// TestErrorsKeepTheirIdentityAcrossTheWire: a registered application
// error matches errors.Is on the caller, through a call and through a
// Remote's ToHere; the package's sentinels match by kind (unknown function,
// a callee's decode failure); every message names the function and the
// worker once.
func TestErrorsKeepTheirIdentityAcrossTheWire(t *testing.T) {
	ctx := context.Background()
	ws := errorGroup(t)
	a := ws[0]
	once := func(err error, parts ...string) {
		t.Helper()
		for _, p := range parts {
			if n := strings.Count(err.Error(), p); n != 1 {
				t.Errorf("%q names %q %d times, want once", err, p, n)
			}
		}
	}

	_, err := worker.Call[int](ctx, a, "B", "find", 1)
	var ue *worker.UserError
	if !errors.Is(err, errNotFound) || errors.Is(err, errConflict) || !errors.As(err, &ue) ||
		ue.Code != errNotFound.Error() || ue.Function != "find" || ue.Worker != "B" {
		t.Fatalf("call: %v (%#v)", err, ue)
	}
	once(err, "find", " B ", "key 1")
	if _, err := worker.Call[int](ctx, a, "B", "find", 2); !errors.Is(err, errConflict) {
		t.Errorf("a registered error returned bare: %v", err)
	}
	_, err = worker.Call[int](ctx, a, "B", "find", 3)
	if !errors.As(err, &ue) || ue.Code != "" || errors.Is(err, errNotFound) || errors.Is(err, errConflict) {
		t.Errorf("an unregistered error: %v", err)
	}

	r, err := worker.Remote[int](ctx, a, "B", "find", 1)
	if err != nil {
		t.Fatal(err)
	}
	_, err = r.ToHere(ctx)
	r.Release()
	if !errors.Is(err, errNotFound) || !errors.As(err, &ue) || ue.Function != "find" {
		t.Errorf("remote: %v", err)
	}
	once(err, "find", " B ")

	_, err = worker.Call[int](ctx, a, "B", "nope", 1)
	if !errors.Is(err, worker.ErrUnknownFunction) {
		t.Errorf("unknown function: %v", err)
	}
	once(err, "nope", "B", "unknown function")
	r, _ = worker.Remote[int](ctx, a, "B", "nope", 1)
	_, err = r.ToHere(ctx)
	r.Release()
	if !errors.Is(err, worker.ErrUnknownFunction) {
		t.Errorf("unknown function by Remote: %v", err)
	}
	once(err, "nope", "B", "unknown function")

	_, err = worker.Call[int](ctx, a, "B", "picky", picky{V: -1})
	if !errors.Is(err, worker.ErrCodec) {
		t.Errorf("the callee's decode failure: %v", err)
	}
	once(err, "picky", "B", "negative -1")
}

// TestNilRRefArgumentIsAnError: a nil *RRef argument is refused with
// ErrUnbound before anything is sent, not a codec panic.
func TestNilRRefArgumentIsAnError(t *testing.T) {
	ctx := context.Background()
	setup := func(w *worker.Worker) {
		worker.Register(w, "take", func(ctx context.Context, r *worker.RRef[int]) (int, error) { return 0, nil })
		worker.Register(w, "takeStruct", func(ctx context.Context, s struct{ R *worker.RRef[int] }) (bool, error) {
			return s.R == nil, nil
		})
	}
	ws, err := worker.NewGroup([]string{"A", "B"}, worker.Config{Setup: setup})
	if err != nil {
		t.Fatal(err)
	}
	defer worker.ShutdownGroup(ctx, ws)
	var nilRef *worker.RRef[int]
	if _, err := worker.Call[int](ctx, ws[0], "B", "take", nilRef); !errors.Is(err, worker.ErrUnbound) {
		t.Errorf("nil RRef argument: %v", err)
	}
	if _, err := worker.Remote[int](ctx, ws[0], "B", "take", nilRef); !errors.Is(err, worker.ErrUnbound) {
		t.Errorf("nil RRef argument to a Remote: %v", err)
	}
	isNil, err := worker.Call[bool](ctx, ws[0], "B", "takeStruct", struct{ R *worker.RRef[int] }{})
	if err != nil || !isNil {
		t.Errorf("a struct with a nil RRef field: %v %v", isNil, err)
	}
}

// TestDeadlineTravelsWithTheCall: the callee's context has the caller's
// deadline (the time left, as the caller measured it when it sent the
// call), or the default CallTimeout when the caller's has none.
func TestDeadlineTravelsWithTheCall(t *testing.T) {
	ctx := context.Background()
	setup := func(w *worker.Worker) {
		worker.Register(w, "left", func(ctx context.Context, _ int) (time.Duration, error) {
			d, ok := ctx.Deadline()
			if !ok {
				return -1, nil
			}
			return time.Until(d), nil
		})
	}
	ws, err := worker.NewGroup([]string{"A", "B"}, worker.Config{Setup: setup, CallTimeout: 7 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer worker.ShutdownGroup(ctx, ws)
	dctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	left, err := worker.Call[time.Duration](dctx, ws[0], "B", "left", 0)
	if err != nil || left <= 0 || left > 20*time.Second {
		t.Errorf("with the caller's 20 s: the callee had %v (%v)", left, err)
	}
	left, err = worker.Call[time.Duration](ctx, ws[0], "B", "left", 0)
	if err != nil || left <= 0 || left > 7*time.Second {
		t.Errorf("with no deadline: the callee had %v (%v), want at most the CallTimeout of 7 s", left, err)
	}
	past, cancelPast := context.WithDeadline(ctx, time.Now().Add(-time.Second))
	defer cancelPast()
	if _, err := worker.Call[time.Duration](past, ws[0], "B", "left", 0); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a deadline already past: %v", err)
	}
}

// TestCancellationReachesTheCallee: a caller that stops waiting (its
// context cancelled, or past its deadline) ends the function's context on
// the callee, which would otherwise run on for a minute.
func TestCancellationReachesTheCallee(t *testing.T) {
	ctx := context.Background()
	started := make(chan struct{}, 2)
	ended := make(chan error, 2)
	setup := func(w *worker.Worker) {
		worker.Register(w, "wait", func(ctx context.Context, _ int) (int, error) {
			started <- struct{}{}
			select {
			case <-ctx.Done():
				ended <- context.Cause(ctx)
				return 0, ctx.Err()
			case <-time.After(time.Minute):
				ended <- nil
				return 1, nil
			}
		})
	}
	ws, err := worker.NewGroup([]string{"A", "B"}, worker.Config{Setup: setup})
	if err != nil {
		t.Fatal(err)
	}
	defer worker.ShutdownGroup(ctx, ws)

	cctx, cancel := context.WithCancel(ctx)
	go func() { <-started; cancel() }()
	if _, err := worker.Call[int](cctx, ws[0], "B", "wait", 0); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled call: %v", err)
	}
	if cause := waitFor(t, ended); !errors.Is(cause, context.Canceled) {
		t.Errorf("the callee's context ended with %v", cause)
	}

	dctx, cancelD := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancelD()
	if _, err := worker.Call[int](dctx, ws[0], "B", "wait", 0); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("call past its deadline: %v", err)
	}
	<-started
	if cause := waitFor(t, ended); cause == nil {
		t.Error("the callee ran on past the caller's deadline")
	}

	// Asynchronous calls: the Future's context is the call's.
	gctx, cancelG := context.WithCancel(ctx)
	f := worker.Go[int](gctx, ws[0], "B", "wait", 0)
	<-started
	cancelG()
	if _, err := f.Wait(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled Go: %v", err)
	}
	if cause := waitFor(t, ended); !errors.Is(cause, context.Canceled) {
		t.Errorf("Go's callee ended with %v", cause)
	}
}

// waitFor is the next value on ch, within a bound far past any expected wait.
func waitFor[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(30 * time.Second):
		t.Fatal("the callee never ended")
	}
	var zero T
	return zero
}
