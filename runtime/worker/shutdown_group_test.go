package worker

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"
)

// TestShutdownGroupWithoutDeadlineEnds: workers that settle first must go
// on answering the barrier until the others have settled too. (When the
// settled ones waited for the rest before closing, they stopped sending
// their reports, and the last one, with no deadline to give up at, waited
// forever: one run in forty of the README's program.) Messages held back
// at random put the workers' decisions rounds apart, as a loaded machine
// did.
func TestShutdownGroupWithoutDeadlineEnds(t *testing.T) {
	setup := func(w *Worker) {
		Register(w, "add", func(ctx context.Context, x [2]int) (int, error) { return x[0] + x[1], nil })
		Register(w, "double", func(ctx context.Context, r *RRef[int]) (int, error) {
			v, err := r.ToHere(ctx)
			return 2 * v, err
		})
	}
	const rounds = 60
	for i := range rounds {
		ctx := context.Background()
		ws, err := NewGroup([]string{"A", "B", "C"}, Config{Setup: setup, Logger: quiet, jitter: func() time.Duration { return time.Duration(rand.IntN(3)) * time.Millisecond }})
		if err != nil {
			t.Fatal(err)
		}
		r, _ := Remote[int](ctx, ws[0], "B", "add", [2]int{1, 2})
		if d, err := Call[int](ctx, ws[0], "C", "double", r); err != nil || d != 6 {
			t.Fatalf("round %d: %v %v", i, d, err)
		}
		r.Release()
		done := make(chan error, 1)
		go func() { done <- ShutdownGroup(ctx, ws) }()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("round %d: %v", i, err)
			}
		case <-time.After(30 * time.Second):
			for _, w := range ws {
				w.Close()
			}
			t.Fatalf("round %d: ShutdownGroup with no deadline never returned", i)
		}
	}
}
