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

// TestSymmetryKeepsTheVerdicts: the participants are declared
// interchangeable (worldConfig; the coordinator holds them in a set), so
// the search keeps one state of each class alike but for their names:
// fewer states, the same schedules counted, the seeded bug found on a
// schedule as short, which replays.
func TestSymmetryKeepsTheVerdicts(t *testing.T) {
	for _, c := range []struct {
		participants, crashes int
		eager                 bool
	}{{2, 1, false}, {3, 1, false}, {3, 0, true}} {
		cfg := worldConfig(c.participants, c.crashes, c.eager)
		start, err := world.Start(cfg)
		if err != nil {
			t.Fatal(err)
		}
		sym := explore.Explore(start, explore.Options{})
		full := explore.Explore(start, explore.Options{NoSymmetry: true, NoSleepSets: true})
		if sym.Renamings < 2 || sym.States > full.States || sym.Passed() && sym.States == full.States || sym.Passed() != full.Passed() || sym.Passed() == c.eager {
			t.Fatalf("%+v: symmetry %v in %d states (%d renamings), without %v in %d", c, sym.Violation, sym.States, sym.Renamings, full.Violation, full.States)
		}
		if sym.Schedules != full.Schedules {
			t.Errorf("%+v: %g schedules under symmetry, %g without", c, sym.Schedules, full.Schedules)
		}
		if c.eager {
			if sym.Violation.Invariant != tpcpb.InvariantValidity || !sym.Shortest || len(sym.Schedule) != len(full.Schedule) {
				t.Fatalf("%+v: %v in %d steps (shortest %v), %d without", c, sym.Violation, len(sym.Schedule), sym.Shortest, len(full.Schedule))
			}
			if again := explore.Replay(start, sym.Schedule); again.Violation == nil || again.Violation.Error() != sym.Violation.Error() {
				t.Fatalf("replay: %v, want %v", again.Violation, sym.Violation)
			}
		}
		t.Logf("%+v: %d states under symmetry, %d without, %g schedules", c, sym.States, full.States, sym.Schedules)
	}
}
