package worker

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"
)

// TestCorkedAnswersDoNotWaitForABlockedFunction attacks the receiver's
// cork (tcp): a burst of calls is answered in one write, but an answer
// must not wait for a later call of the burst whose function blocks
// outside this package. Each round sends a call whose function blocks
// until the test releases it, among fast calls in the same burst; the
// fast ones must all be answered while it still blocks.
func TestCorkedAnswersDoNotWaitForABlockedFunction(t *testing.T) {
	// This round's blocked function: it says it runs, then waits.
	var mu sync.Mutex
	var blocked, release chan struct{}
	setup := func(w *Worker) {
		Register(w, "add", func(ctx context.Context, x [2]int64) (int64, error) { return x[0] + x[1], nil })
		Register(w, "block", func(ctx context.Context, _ int64) (int64, error) {
			mu.Lock()
			b, r := blocked, release
			mu.Unlock()
			close(b)
			<-r // outside this package: only the watchdog sees it
			return 0, nil
		})
	}
	_, client := startPair(t, "tcp", setup)
	const rounds, fast = 20, 15
	for round := range rounds {
		mu.Lock()
		blocked, release = make(chan struct{}), make(chan struct{})
		mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		slow := Go[int64](ctx, client, "server", "block", int64(0))
		var wg sync.WaitGroup
		errs := make(chan error, fast)
		for i := range fast {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if v, err := Call[int64](ctx, client, "server", "add", [2]int64{int64(i), 1}); err != nil || v != int64(i)+1 {
					errs <- err
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("round %d: a fast call beside a blocked one: %v", round, err)
		}
		select {
		case <-blocked:
		case <-slow.Done():
			_, err := slow.Wait(ctx)
			t.Fatalf("round %d: the blocking call ended before it was released: %v", round, err)
		}
		close(release) // only now: the fast answers came while it blocked
		if _, err := slow.Wait(ctx); err != nil {
			t.Fatalf("round %d: the blocked call: %v", round, err)
		}
		cancel()
	}
}

// TestQueuedLargeCallsOverTCP: calls whose arguments exceed the eager
// limit always go through the drainer, which sends what is queued for a
// peer together. Eight 40 KiB calls at once need more rendezvous slots
// than there are: a drainer that corked the batch and then waited for a
// slot held the very frames the peer had to answer, and the link hung for
// good (found in review). Each round must finish, and a small call after.
func TestQueuedLargeCallsOverTCP(t *testing.T) {
	_, client := startPair(t, "tcp", func(w *Worker) {
		Register(w, "len", func(ctx context.Context, p []byte) (int, error) { return len(p), nil })
	})
	const callers, size = 8, 40 << 10
	for round := range 50 {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		errs := make(chan error, callers)
		for range callers {
			go func() {
				n, err := Call[int](ctx, client, "server", "len", make([]byte, size))
				if err == nil && n != size {
					err = fmt.Errorf("the server saw %d bytes, want %d", n, size)
				}
				errs <- err
			}()
		}
		for range callers {
			if err := <-errs; err != nil {
				cancel()
				t.Fatalf("round %d: %v", round, err)
			}
		}
		if n, err := Call[int](ctx, client, "server", "len", []byte("ok")); err != nil || n != 2 {
			cancel()
			t.Fatalf("round %d: a small call after: %d, %v", round, n, err)
		}
		cancel()
	}
}
