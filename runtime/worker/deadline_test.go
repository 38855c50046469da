package worker

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"
)

// pairOver starts workers A and B over transport, mem (NewGroup) or tcp
// (Start on loopback), each set up by setup; they close with the test.
func pairOver(t *testing.T, transport string, setup func(*Worker)) (a, b *Worker) {
	t.Helper()
	cfg := Config{Logger: quiet, Setup: setup}
	if transport == "mem" {
		ws, err := NewGroup([]string{"A", "B"}, cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ws[0].Close(); ws[1].Close() })
		return ws[0], ws[1]
	}
	var peers []Peer
	for _, name := range []string{"A", "B"} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		peers = append(peers, Peer{Name: name, Addr: ln.Addr().String()})
		ln.Close()
	}
	ctx := ctxT(t)
	done := make(chan error, 1)
	go func() {
		var err error
		b, err = Start(ctx, "B", peers, []byte("s"), cfg)
		done <- err
	}()
	a, err := Start(ctx, "A", peers, []byte("s"), cfg)
	if berr := <-done; err != nil || berr != nil {
		t.Fatal(err, berr)
	}
	t.Cleanup(func() { a.Close(); b.Close() })
	return a, b
}

// The caller's deadline is short, the runs several: the callee's own
// clock and the caller's cancel race once per run.
const (
	callerDeadline = 20 * time.Millisecond
	deadlineRuns   = 5
)

// When the caller's deadline ended a call, the callee's context said
// Canceled (5 runs of 5 over tcp): the caller's cancel, sent as its
// deadline passed, overtook the callee's own timer, which runs one transit
// later. The cancel now says which it was, and the callee's context
// reports DeadlineExceeded; a cancel still reports Canceled.
func TestCalleeSeesTheCallersDeadline(t *testing.T) {
	for _, transport := range []string{"mem", "tcp"} {
		t.Run(transport, func(t *testing.T) {
			// What each run's function saw, by run: a run's record comes
			// after its caller returned, maybe after the next run began.
			type saw struct {
				run int
				err error
			}
			seen := make(chan saw, deadlineRuns+1)
			a, _ := pairOver(t, transport, func(w *Worker) {
				Register(w, "wait", func(ctx context.Context, run int) (int, error) {
					<-ctx.Done()
					seen <- saw{run, ctx.Err()}
					return 0, ctx.Err()
				})
			})
			ctx := ctxT(t)
			callee := func(run int, what string, want error) {
				t.Helper()
				for {
					select {
					case got := <-seen:
						if got.run != run {
							continue // an earlier run's, already checked or never waited for
						}
						if got.err != want {
							t.Errorf("%s: the callee's context says %v, want %v", what, got.err, want)
						}
						return
					case <-ctx.Done():
						t.Fatalf("%s: the callee's context never ended", what)
					}
				}
			}
			for run := range deadlineRuns {
				before := a.DebugInfo().MessagesSent
				cctx, cancel := context.WithTimeout(ctx, callerDeadline)
				_, err := Call[int](cctx, a, "B", "wait", run)
				cancel()
				if !errors.Is(err, context.DeadlineExceeded) {
					t.Errorf("the caller: %v, want DeadlineExceeded", err)
					continue
				}
				if di := a.DebugInfo(); di.MessagesSent == before && di.Outgoing == 0 {
					// The deadline passed before the call could leave (a
					// loaded host): nothing was sent, nothing runs.
					t.Logf("run %d: the call never left", run)
					continue
				}
				callee(run, "past the caller's deadline", context.DeadlineExceeded)
			}
			cctx, cancel := context.WithCancel(ctx)
			time.AfterFunc(callerDeadline, cancel)
			if _, err := Call[int](cctx, a, "B", "wait", deadlineRuns); !errors.Is(err, context.Canceled) {
				t.Errorf("the caller, cancelled: %v", err)
			}
			callee(deadlineRuns, "cancelled by the caller", context.Canceled)
		})
	}
}

// A function that returns ctx.Err() (or wraps it) gave its caller
// "... context deadline exceeded: context deadline exceeded": the
// message, then the sentinel wrapped after it.
func TestContextErrorsSaidOnce(t *testing.T) {
	a, _ := pairOver(t, "mem", func(w *Worker) {
		Register(w, "own", func(ctx context.Context, wrap bool) (int, error) {
			c, cancel := context.WithTimeout(ctx, time.Millisecond)
			defer cancel()
			<-c.Done()
			if wrap {
				return 0, errors.Join(errors.New("db query"), c.Err())
			}
			return 0, c.Err()
		})
		Register(w, "quit", func(ctx context.Context, _ bool) (int, error) {
			c, cancel := context.WithCancel(ctx)
			cancel()
			return 0, c.Err()
		})
	})
	ctx := ctxT(t)
	once := func(what string, err, cause error) {
		t.Helper()
		if !errors.Is(err, cause) || strings.Count(err.Error(), cause.Error()) != 1 || !strings.Contains(err.Error(), " on B") {
			t.Errorf("%s: %q, want it to match %v and say it once, naming the call", what, err, cause)
		}
	}
	_, err := Call[int](ctx, a, "B", "own", false)
	once("a call returning ctx.Err()", err, context.DeadlineExceeded)
	_, err = Call[int](ctx, a, "B", "own", true)
	once("a call returning a join with ctx.Err()", err, context.DeadlineExceeded)
	if err != nil && !strings.Contains(err.Error(), "db query") {
		t.Errorf("the function's own words are lost: %v", err)
	}
	_, err = Call[int](ctx, a, "B", "quit", false)
	once("a call returning its own cancel", err, context.Canceled)
	r, err := Remote[int](ctx, a, "B", "own", false)
	if err != nil {
		t.Fatal(err)
	}
	_, err = r.ToHere(ctx)
	once("a Remote's value", err, context.DeadlineExceeded)
	r.Release()
}
