package worker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
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

// Callers polling their connections while the peer closes: every call
// returns (with an error once the peer is gone), nothing hangs or crashes.
func TestPeerClosesUnderPollingCallers(t *testing.T) {
	for _, transport := range []string{"mem", "shm"} {
		t.Run(transport, func(t *testing.T) { closeUnderPollers(t, transport) })
	}
}

// pair starts workers A and B over transport, B serving "add".
func pair(t *testing.T, transport string) (*Worker, *Worker) {
	return pairServing(t, transport, func(*Worker) {})
}

// pairServing starts workers A and B over transport, B serving "add" and
// what setup registers.
func pairServing(t *testing.T, transport string, setup func(*Worker)) (*Worker, *Worker) {
	if transport == "mem" {
		ws := group(t, "A", "B")
		setup(ws[1])
		return ws[0], ws[1]
	}
	peers := peersFor(transport)
	ctx := ctxT(t)
	var b *Worker
	done := make(chan error, 1)
	go func() {
		var err error
		b, err = Start(ctx, "B", peers, []byte("p"), Config{Logger: quiet, Setup: func(w *Worker) {
			Register(w, "add", func(ctx context.Context, x [2]int) (int, error) { return x[0] + x[1], nil })
			setup(w)
		}})
		done <- err
	}()
	a, err := Start(ctx, "A", peers, []byte("p"), Config{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	return a, b
}

func closeUnderPollers(t *testing.T, transport string) {
	for round := range 20 {
		a, b := pair(t, transport)
		closeUnderCallers(t, round, a, b, ErrPeerFailed)
		a.Close()
	}
}

// closeUnderCallers runs eight callers from a to b in loops, closes victim
// after a moment that varies with round, and expects every caller to
// return with want.
func closeUnderCallers(t *testing.T, round int, a, victim *Worker, want error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	errs := make(chan error, 8)
	for range 8 {
		go func() {
			for {
				if _, err := Call[int](ctx, a, "B", "add", [2]int{1, 2}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	time.Sleep(time.Duration(round%5) * time.Millisecond)
	victim.Close()
	for range 8 {
		select {
		case err := <-errs:
			if !errors.Is(err, want) {
				t.Fatalf("round %d: a call failed with %v, want %v", round, err, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("round %d: a caller did not return after %s closed", round, victim.Name())
		}
	}
}

// Callers polling while their own worker closes return too, and a call
// made after Close fails at once.
func TestCloseUnderPollingCallers(t *testing.T) {
	for _, transport := range []string{"mem", "shm"} {
		t.Run(transport, func(t *testing.T) {
			for round := range 10 {
				a, b := pair(t, transport)
				closeUnderCallers(t, round, a, a, ErrClosed)
				ctx := ctxT(t)
				// A call that waited would end with its context's deadline instead.
				if _, err := Call[int](ctx, a, "B", "add", [2]int{1, 2}); !errors.Is(err, ErrClosed) {
					t.Fatalf("a call on a closed worker: %v", err)
				}
				if _, err := Remote[int](ctx, a, "B", "add", [2]int{1, 2}); !errors.Is(err, ErrClosed) {
					t.Fatalf("a Remote on a closed worker: %v", err)
				}
				if _, err := NewRRef(a, 1); !errors.Is(err, ErrClosed) {
					t.Fatalf("NewRRef on a closed worker: %v", err)
				}
				b.Close()
			}
		})
	}
}

// A receiving goroutine reuses a frame's buffer once nothing refers to it:
// arguments a function keeps (without copying) and results callers hold
// must not change when later frames arrive.
func TestReusedFramesLeaveKeptValuesAlone(t *testing.T) {
	for _, transport := range []string{"mem", "shm"} {
		t.Run(transport, func(t *testing.T) {
			var mu sync.Mutex
			var kept [][]byte
			setup := func(w *Worker) {
				Register(w, "keepbytes", func(ctx context.Context, b []byte) ([]byte, error) {
					mu.Lock()
					kept = append(kept, b)
					mu.Unlock()
					return b, nil
				})
			}
			ctx := ctxT(t)
			a, b := pairServing(t, transport, setup)
			defer shutdown(t, []*Worker{a, b})
			var results [][]byte
			for i := 0; i < 200; i++ {
				r, err := Call[[]byte](ctx, a, "B", "keepbytes", bytes.Repeat([]byte{byte(i)}, 1+i%50))
				if err != nil {
					t.Fatal(err)
				}
				results = append(results, r)
			}
			mu.Lock()
			defer mu.Unlock()
			for i := range results {
				want := bytes.Repeat([]byte{byte(i)}, 1+i%50)
				if !bytes.Equal(kept[i], want) || !bytes.Equal(results[i], want) {
					t.Fatalf("call %d: the function kept % x and the caller got % x, want % x", i, kept[i], results[i], want)
				}
			}
		})
	}
}
