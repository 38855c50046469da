package worker

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// closeBound is far above what Close takes when nothing blocks it (well
// under a millisecond) and far below "forever".
const closeBound = 3 * time.Second

// Close and Shutdown past its context used to block for as long as a user
// function blocked. They must return, abandoning the function.
func TestCloseAndShutdownDoNotWaitForBlockedFunctions(t *testing.T) {
	for _, how := range []string{"Close", "Shutdown"} {
		t.Run(how, func(t *testing.T) {
			ws := group(t, "A", "B")
			a, b := ws[0], ws[1]
			release := make(chan struct{})
			entered := make(chan struct{}, 4)
			finished := make(chan struct{}, 4)
			Register(b, "block", func(ctx context.Context, _ int) (int, error) {
				defer func() { finished <- struct{}{} }()
				entered <- struct{}{}
				<-release // ignores its context, as careless code does
				return 0, nil
			})
			ctx := ctxT(t)
			// Two at once: one runs on the receiving goroutine, the next on
			// the one that took over its connection.
			f1 := Go[int](ctx, a, "B", "block", 0)
			f2 := Go[int](ctx, a, "B", "block", 0)
			<-entered
			<-entered
			start := time.Now()
			done := make(chan error, 2)
			go func() {
				if how == "Close" {
					done <- b.Close()
					return
				}
				sctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
				defer cancel()
				done <- b.Shutdown(sctx)
			}()
			select {
			case err := <-done:
				if how == "Shutdown" && !errors.Is(err, ErrLeak) {
					t.Errorf("Shutdown past its context with functions running: %v, want a LeakError", err)
				}
			case <-time.After(closeBound):
				t.Fatalf("%s still blocked after %v by a blocked function", how, closeBound)
			}
			t.Logf("%s returned after %v", how, time.Since(start))
			for _, f := range []*Future[int]{f1, f2} {
				if _, err := f.Wait(ctx); err == nil {
					t.Error("a call to a closed worker succeeded")
				}
			}
			a.Close()
			close(release) // let the abandoned functions end, for goleak
			<-finished
			<-finished
		})
	}
}

// A function that calls runtime.Goexit (t.FailNow does) used to kill the
// goroutine receiving its connection, silently: no later call got through.
func TestGoexitAndPanicFailOnlyTheirCall(t *testing.T) {
	ws := group(t, "A", "B")
	a, b := ws[0], ws[1]
	Register(b, "goexit", func(ctx context.Context, _ int) (int, error) {
		runtime.Goexit()
		return 0, nil
	})
	Register(b, "panic", func(ctx context.Context, _ int) (int, error) { panic("boom") })
	ctx := ctxT(t)
	for i := 0; i < 3; i++ {
		_, err := Call[int](ctx, a, "B", "goexit", 0)
		if err == nil || !strings.Contains(err.Error(), "Goexit") {
			t.Fatalf("call of a function that called Goexit: %v, want an error naming Goexit", err)
		}
		if _, err := Call[int](ctx, a, "B", "panic", 0); err == nil || !strings.Contains(err.Error(), "boom") {
			t.Fatalf("call of a panicking function: %v", err)
		}
		r, err := Remote[int](ctx, a, "B", "goexit", 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.ToHere(ctx); err == nil || !strings.Contains(err.Error(), "Goexit") {
			t.Fatalf("a Remote whose function called Goexit: %v", err)
		}
		r.Release()
		if v, err := Call[int](ctx, a, "B", "add", [2]int{i, 1}); err != nil || v != i+1 {
			t.Fatalf("the connection after Goexit: %d, %v", v, err)
		}
	}
	shutdown(t, ws)
}

// TestGoroutineSetWaitsForEveryMember races members leaving and rejoining
// the set (as a receiver running functions inline does on every call)
// against Close's wait: wait returns only once no member is inside, no
// member gets in after it began, and the set's channel is closed once,
// whichever side empties it last.
func TestGoroutineSetWaitsForEveryMember(t *testing.T) {
	for round := range 200 {
		g := newGoroutines()
		var inside atomic.Int64
		var wg sync.WaitGroup
		for m := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; ; i++ {
					if !g.add() {
						return
					}
					inside.Add(1)
					if (i+m+round)%3 == 0 {
						runtime.Gosched()
					}
					inside.Add(-1)
					g.done()
				}
			}()
		}
		if round%2 == 0 {
			runtime.Gosched() // sometimes wait before any member got in
		}
		g.wait()
		if n := inside.Load(); n != 0 {
			t.Fatalf("round %d: wait returned with %d members inside", round, n)
		}
		if g.add() {
			t.Fatalf("round %d: a member got in after wait", round)
		}
		g.wait() // a second Close returns too
		wg.Wait()
	}
	empty := newGoroutines()
	done := make(chan struct{})
	go func() { empty.wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(closeBound):
		t.Fatal("wait on an empty set did not return")
	}
}
