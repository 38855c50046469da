package main

import (
	"testing"

	"github.com/rrefkit/rref/examples/dgc/dgcpb"
	"github.com/rrefkit/rref/explore"
	"github.com/rrefkit/rref/protocol/world"
)

func explored(t *testing.T, cfg world.Config, opt explore.Options) (explore.Result, func() *world.World) {
	t.Helper()
	start, err := world.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return explore.Explore(start, opt), start
}

// TestLeasesKeepTheObject: every order of two clients' takes, renewals,
// drops and the owner's unexport keeps the object while it is held, and
// no client is left waiting.
func TestLeasesKeepTheObject(t *testing.T) {
	for _, c := range []struct{ clients, rounds int }{{1, 2}, {2, 1}} {
		r, _ := explored(t, worldConfig(c.clients, c.rounds, false), explore.Options{})
		if !r.Passed() || r.Truncated != "" {
			t.Fatalf("%+v: %v %s\n%v", c, r.Violation, r.Truncated, r.Trace)
		}
		t.Logf("%+v: %d states, %d transitions", c, r.States, r.Transitions)
	}
}

// TestCleanOvertakingDirty: without sequence numbers, a clean the network
// delays past the next take's dirty makes the owner collect an object the
// client holds; the shortest such schedule replays.
func TestCleanOvertakingDirty(t *testing.T) {
	r, start := explored(t, worldConfig(1, 2, true), explore.Options{})
	if r.Passed() || r.Violation.Invariant != "Safe" || !r.Shortest {
		t.Fatalf("got %v (shortest %v), want the shortest Safe violation", r.Violation, r.Shortest)
	}
	for i, s := range r.Trace {
		t.Logf("%2d %s", i+1, s)
	}
	again := explore.Replay(start, r.Schedule)
	if again.Violation == nil || again.Violation.Error() != r.Violation.Error() {
		t.Fatalf("replay: %v, want %v", again.Violation, r.Violation)
	}
}

// TestShortLeaseIsFound: a lease no longer than a renewal's worst case
// (renew + 2*maxDelay) runs out while the client holds the object, as the
// clock passing between deliveries shows.
func TestShortLeaseIsFound(t *testing.T) {
	cfg := worldConfig(1, 1, false)
	cfg.Nodes[0].Role = dgcpb.OwnerRole(func() dgcpb.OwnerHandler { return NewOwner(renew+2*maxDelay, 1, false) })
	if r, _ := explored(t, cfg, explore.Options{}); r.Passed() {
		t.Fatalf("a lease of %v passed", renew+2*maxDelay)
	}
}

// TestSymmetryKeepsTheVerdicts: the clients are declared interchangeable
// (worldConfig), so the search keeps one state of each class alike but for
// their names: fewer states, the same verdict, the seeded bug found on a
// schedule as short, which replays.
func TestSymmetryKeepsTheVerdicts(t *testing.T) {
	for _, c := range []struct {
		clients, rounds int
		unsafe          bool
	}{{2, 1, false}, {2, 2, true}} {
		cfg := worldConfig(c.clients, c.rounds, c.unsafe)
		sym, start := explored(t, cfg, explore.Options{})
		full, _ := explored(t, cfg, explore.Options{NoSymmetry: true, NoSleepSets: true})
		if sym.Renamings != 2 || sym.States >= full.States || sym.Passed() != full.Passed() || sym.Passed() == c.unsafe {
			t.Fatalf("%+v: symmetry %v in %d states (%d renamings), without %v in %d", c, sym.Violation, sym.States, sym.Renamings, full.Violation, full.States)
		}
		if sym.Schedules != full.Schedules || sym.Cyclic != full.Cyclic {
			t.Errorf("%+v: %g schedules under symmetry (cyclic %v), %g without (%v)", c, sym.Schedules, sym.Cyclic, full.Schedules, full.Cyclic)
		}
		if c.unsafe {
			if sym.Violation.Invariant != dgcpb.InvariantSafe || !sym.Shortest || len(sym.Schedule) != len(full.Schedule) {
				t.Fatalf("%+v: %v in %d steps (shortest %v), %d without", c, sym.Violation, len(sym.Schedule), sym.Shortest, len(full.Schedule))
			}
			if again := explore.Replay(start, sym.Schedule); again.Violation == nil || again.Violation.Error() != sym.Violation.Error() {
				t.Fatalf("replay: %v, want %v", again.Violation, sym.Violation)
			}
		}
		t.Logf("%+v: %d states under symmetry, %d without", c, sym.States, full.States)
	}
}
