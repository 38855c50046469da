package main

import (
	"testing"

	"github.com/rrefkit/rref/examples/twophase/tpcpb"
	"github.com/rrefkit/rref/explore"
	"github.com/rrefkit/rref/protocol/world"
)

func explored(t *testing.T, cfg world.Config) (explore.Result, func() *world.World) {
	t.Helper()
	start, err := world.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r := explore.Explore(start, explore.Options{})
	if r.Truncated != "" {
		t.Fatalf("incomplete: %s", r.Truncated)
	}
	return r, start
}

// TestAtomicThroughACrash: whatever the votes, and wherever the
// coordinator crashes and restarts, every participant ends committed or
// every one aborted, and none is left prepared.
func TestAtomicThroughACrash(t *testing.T) {
	for _, crashes := range []int{0, 1, 2} {
		r, _ := explored(t, worldConfig(2, crashes, false))
		if !r.Passed() {
			t.Fatalf("%d crashes: %v\n%v", crashes, r.Violation, r.Trace)
		}
		t.Logf("%d crashes: %d states", crashes, r.States)
	}
}

// TestCommitBeforeAllVotes: a coordinator that commits on the first yes
// has a participant commit while another votes no; the shortest schedule
// replays.
func TestCommitBeforeAllVotes(t *testing.T) {
	r, start := explored(t, worldConfig(2, 0, true))
	if r.Passed() || r.Violation.Invariant != "Validity" || !r.Shortest {
		t.Fatalf("got %v (shortest %v)", r.Violation, r.Shortest)
	}
	for i, s := range r.Trace {
		t.Logf("%2d %s", i+1, s)
	}
	if again := explore.Replay(start, r.Schedule); again.Violation == nil || again.Violation.Error() != r.Violation.Error() {
		t.Fatalf("replay: %v, want %v", again.Violation, r.Violation)
	}
}

// amnesiac ignores its log when it restarts.
type amnesiac struct{ *Coordinator }

func (amnesiac) Start(tpcpb.CoordinatorEnv, tpcpb.Message) error { return nil }

// TestRecoveryNeedsTheLog: a coordinator that restarts without reading
// its log begins the transaction again, and is caught.
func TestRecoveryNeedsTheLog(t *testing.T) {
	cfg := worldConfig(2, 1, false)
	cfg.Nodes[0].Role = tpcpb.CoordinatorRole(func() tpcpb.CoordinatorHandler {
		return amnesiac{NewCoordinator(participantNames(2), false)}
	})
	r, _ := explored(t, cfg)
	if r.Passed() {
		t.Fatal("an amnesiac coordinator passed")
	}
	t.Logf("%v after %d steps", r.Violation, len(r.Trace))
}
