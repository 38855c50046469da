package worker

import (
	"context"
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
