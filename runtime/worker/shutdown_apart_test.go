package worker

import (
	"context"
	"testing"
	"time"
)

// TestMembersShutDownApart: members of a tcp group that each call Shutdown
// on their own, as processes do, right after traffic, must each return
// nil promptly. The member that closes first closes its links while its
// peer may still be writing to them: its close must reach the peer as a
// close (so the peer's barrier sees it left), not as a break the peer
// waits DeadAfter to resume. One such Shutdown timed out in CI before the
// tcp close was made to say so in every case; this test did not reproduce
// that (90 rounds on the old transport passed: the race is rare at this
// level), the fifo close tests do, and this one keeps the scenario itself
// under test.
func TestMembersShutDownApart(t *testing.T) {
	const rounds = 30
	for round := range rounds {
		peers := peersFor("tcp")
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		ws := startMembers(t, ctx, peers, Config{Logger: quiet, Setup: func(w *Worker) {
			Register(w, "add", func(ctx context.Context, x [2]int) (int, error) { return x[0] + x[1], nil })
		}})
		errs := make(chan error, len(ws))
		// Traffic both ways up to the moment each member leaves.
		for i, w := range ws {
			other := peers[1-i].Name
			for range 50 {
				if _, err := Call[int](ctx, w, other, "add", [2]int{1, 2}); err != nil {
					t.Fatal(err)
				}
			}
		}
		start := time.Now()
		for _, w := range ws {
			go func() {
				sctx, scancel := context.WithTimeout(context.Background(), 8*time.Second)
				defer scancel()
				errs <- w.Shutdown(sctx)
			}()
		}
		for range ws {
			if err := <-errs; err != nil {
				t.Errorf("round %d: a member's own Shutdown after %v: %v", round, time.Since(start), err)
			}
		}
		cancel()
	}
}
