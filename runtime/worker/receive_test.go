package worker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/rrefkit/rref/fifo"
)

// A function that calls back the worker that called it, which calls it
// again: each nested wait must free the connection it was received on.
func TestNestedCallsBackHandOff(t *testing.T) {
	ws := group(t, "a", "b")
	defer shutdown(t, ws)
	a, b := ws[0], ws[1]
	Register(b, "ping", func(ctx context.Context, n int) (int, error) {
		if n == 0 {
			return 0, nil
		}
		v, err := Call[int](ctx, b, "a", "pong", n-1)
		return v + 1, err
	})
	Register(a, "pong", func(ctx context.Context, n int) (int, error) {
		if n == 0 {
			return 0, nil
		}
		v, err := Call[int](ctx, a, "b", "ping", n-1)
		return v + 1, err
	})
	got, err := Call[int](ctxT(t), a, "b", "ping", 6)
	if err != nil || got != 6 {
		t.Fatalf("ping 6 = %d, %v; want 6", got, err)
	}
	// The outermost ping runs on b's receiving goroutine and must give its
	// connection away when it waits; deeper calls may arrive while a caller
	// polls for its reply, and run on goroutines of their own.
	// (On a loaded machine the watchdog may move it first: an overrun.)
	if d := b.DebugInfo(); d.Handoffs+d.Overruns < 1 {
		t.Errorf("the outermost ping waited without giving its connection away (%+v)", d)
	}
}

// A function blocked outside the package (here on a channel that a later
// call from the same peer closes) is moved off its connection by the
// watchdog, so the later call gets through.
func TestBlockedFunctionOverrun(t *testing.T) {
	ws := group(t, "a", "b")
	defer shutdown(t, ws)
	a, b := ws[0], ws[1]
	gate := make(chan struct{})
	Register(b, "wait", func(ctx context.Context, _ int) (int, error) {
		<-gate
		return 1, nil
	})
	Register(b, "open", func(ctx context.Context, _ int) (int, error) {
		close(gate)
		return 2, nil
	})
	ctx := ctxT(t)
	waited := Go[int](ctx, a, "b", "wait", 0)
	if v, err := Call[int](ctx, a, "b", "open", 0); err != nil || v != 2 {
		t.Fatalf("open = %d, %v", v, err)
	}
	if v, err := waited.Wait(ctx); err != nil || v != 1 {
		t.Fatalf("wait = %d, %v", v, err)
	}
	if n := b.DebugInfo().Overruns; n < 1 {
		t.Errorf("the blocked function was not moved by the watchdog (overruns %d)", n)
	}
}

// A function that drops its context (context.Background) and calls back is
// rescued by the watchdog too.
func TestCallBackWithoutContext(t *testing.T) {
	ws := group(t, "a", "b")
	defer shutdown(t, ws)
	a, b := ws[0], ws[1]
	Register(b, "outer", func(ctx context.Context, _ int) (int, error) {
		return Call[int](context.Background(), b, "a", "inner", 0)
	})
	Register(a, "inner", func(ctx context.Context, _ int) (int, error) {
		return Call[int](context.Background(), a, "b", "add", [2]int{3, 4})
	})
	if v, err := Call[int](ctxT(t), a, "b", "outer", 0); err != nil || v != 7 {
		t.Fatalf("outer = %d, %v; want 7", v, err)
	}
}

// With busy polling (FIFO.Spin < 0) a caller that polls for its reply
// still returns when its context ends, though no message ever comes.
func TestBusyPollingCallerHonoursContext(t *testing.T) {
	g := fmt.Sprintf("shm:bp%d", os.Getpid())
	peers := []Peer{{Name: "A", Addr: g}, {Name: "B", Addr: g}}
	cfg := Config{Logger: quiet, FIFO: fifo.Config{Spin: -1}}
	release := make(chan struct{})
	ctx := ctxT(t)
	var b *Worker
	done := make(chan error, 1)
	go func() {
		c := cfg
		c.Setup = func(w *Worker) {
			Register(w, "stall", func(ctx context.Context, _ int) (int, error) { <-release; return 0, nil })
		}
		var err error
		b, err = Start(ctx, "B", peers, []byte("s"), c)
		done <- err
	}()
	a, err := Start(ctx, "A", peers, []byte("s"), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	defer a.Close()
	defer close(release)
	cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	returned := make(chan error, 1)
	go func() { _, err := Call[int](cctx, a, "B", "stall", 0); returned <- err }()
	select {
	case err := <-returned:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("call past its deadline: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a busy-polling caller ignored its context")
	}
}
