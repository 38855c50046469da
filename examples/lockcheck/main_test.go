package main

import (
	"testing"

	"github.com/rrefkit/rref/explore"
	"github.com/rrefkit/rref/gen"
	"github.com/rrefkit/rref/internal/cli"
	"github.com/rrefkit/rref/protocol/world"
	"github.com/rrefkit/rref/spec"
)

// TestGeneratedIsFresh fails when lockpb is not what rrefgen makes of
// lock.rspec today (run go generate ./examples/lockcheck).
func TestGeneratedIsFresh(t *testing.T) {
	p, err := spec.ParseFile("lock.rspec")
	if err != nil {
		t.Fatal(err)
	}
	files, err := gen.Generate(p, "github.com/rrefkit/rref/examples/lockcheck/lockpb")
	if err != nil {
		t.Fatal(err)
	}
	diffs, err := cli.Stale("lockpb", files)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range diffs {
		t.Error(d)
	}
}

func explored(t *testing.T, cfg Config, opt explore.Options) explore.Result {
	t.Helper()
	return explore.Explore(started(t, cfg), opt)
}

func started(t *testing.T, cfg Config) func() *world.World {
	t.Helper()
	start, err := world.Start(worldConfig(cfg))
	if err != nil {
		t.Fatal(err)
	}
	return start
}

// TestCorrectServerPasses: every order of two clients taking the lock
// twice, with one resent message anywhere, keeps every invariant; the
// count of states is the same on one goroutine as on two.
func TestCorrectServerPasses(t *testing.T) {
	cfg := Config{Clients: 2, Rounds: 2, Resends: 1}
	one := explored(t, cfg, explore.Options{})
	two := explored(t, cfg, explore.Options{Workers: 2})
	for _, r := range []explore.Result{one, two} {
		if !r.Passed() || r.Truncated != "" {
			t.Fatalf("%v %s\n%v", r.Violation, r.Truncated, r.Trace)
		}
	}
	if one.States != two.States || one.Schedules != two.Schedules || one.States < 100 {
		t.Fatalf("one worker: %d states %g schedules; two: %d states %g schedules", one.States, one.Schedules, two.States, two.Schedules)
	}
}

// TestSeededBugsAreFound: each bug breaks the invariant it should, on a
// shortest schedule that replays to the same violation.
func TestSeededBugsAreFound(t *testing.T) {
	for _, tc := range []struct {
		cfg       Config
		invariant string
	}{
		{Config{Clients: 2, Rounds: 1, Resends: 1, Forgetful: true}, world.InvariantHot},
		{Config{Clients: 3, Rounds: 1, Resends: 1, Trusting: true}, "Mutex"},
	} {
		r := explored(t, tc.cfg, explore.Options{})
		if r.Passed() || r.Violation.Invariant != tc.invariant {
			t.Fatalf("%+v: got %v, want a %s violation", tc.cfg, r.Violation, tc.invariant)
		}
		again := explore.Replay(started(t, tc.cfg), r.Schedule)
		if again.Violation == nil || again.Violation.Error() != r.Violation.Error() {
			t.Fatalf("replay: %v, want %v", again.Violation, r.Violation)
		}
		if len(r.Trace) == 0 || len(r.Trace) != len(r.Schedule) {
			t.Fatalf("trace %v for schedule %v", r.Trace, r.Schedule)
		}
	}
}

// TestRandomAndPCTFindTheBug: the same bug under the seeded walks.
func TestRandomAndPCTFindTheBug(t *testing.T) {
	for _, mode := range []explore.Mode{explore.Random, explore.PCT} {
		r := explored(t, Config{Clients: 3, Rounds: 1, Resends: 2, Trusting: true}, explore.Options{Mode: mode, Walks: 5000, Seed: 1})
		if r.Passed() {
			t.Errorf("%s: %g walks found nothing", mode, r.Schedules)
		}
	}
}

// TestSymmetryKeepsTheVerdicts: the clients are interchangeable, so the
// search keeps one state of each class alike but for the clients' names:
// fewer states, the same schedules counted, the same verdicts, and
// failing schedules of the model's own that replay.
func TestSymmetryKeepsTheVerdicts(t *testing.T) {
	for _, cfg := range []Config{
		{Clients: 3, Rounds: 1, Resends: 1},
		{Clients: 2, Rounds: 2, Resends: 1},
		{Clients: 3, Rounds: 1, Resends: 1, Trusting: true},
		{Clients: 2, Rounds: 1, Resends: 1, Forgetful: true},
		{Clients: 3, Rounds: 1, Resends: 1, Forgetful: true},
	} {
		sym := explored(t, cfg, explore.Options{})
		full := explored(t, cfg, explore.Options{NoSymmetry: true, NoSleepSets: true})
		if sym.Passed() != full.Passed() || sym.Renamings == 0 || sym.States >= full.States && sym.Passed() {
			t.Fatalf("%+v: symmetry %v in %d states, without %v in %d", cfg, sym.Violation, sym.States, full.Violation, full.States)
		}
		if sym.Passed() && sym.Schedules != full.Schedules {
			t.Errorf("%+v: %g schedules under symmetry, %g without", cfg, sym.Schedules, full.Schedules)
		}
		if !sym.Passed() {
			if len(sym.Schedule) != len(full.Schedule) || !sym.Shortest {
				t.Errorf("%+v: %d steps under symmetry (shortest %v), %d without", cfg, len(sym.Schedule), sym.Shortest, len(full.Schedule))
			}
			again := explore.Replay(started(t, cfg), sym.Schedule)
			if again.Violation == nil || again.Violation.Invariant != sym.Violation.Invariant {
				t.Errorf("%+v: replay %v, want %v", cfg, again.Violation, sym.Violation)
			}
		}
	}
}

// TestCoverageOfTheSpec: with one client taking the lock once, the server
// never hands the lock over (the queue needs a second client, or a second
// round, whose Acquire may overtake the Release); a resent Acquire steps
// Lock in held all the same, before the handler recognises it. With two
// clients, every transition of the spec is taken.
func TestCoverageOfTheSpec(t *testing.T) {
	one := explored(t, Config{Clients: 1, Rounds: 1, Resends: 1}, explore.Options{Coverage: true})
	if got := one.Coverage.NotTaken(); len(got) != 1 || got[0] != "Server: free --HandOver--> held" {
		t.Errorf("one client: not taken %q\n%s", got, one.Coverage.Report())
	}
	two := explored(t, Config{Clients: 2, Rounds: 1, Resends: 1}, explore.Options{Coverage: true})
	if taken, declared := two.Coverage.Counts(); taken != declared || declared != 15 {
		t.Errorf("two clients: %d of %d taken\n%s", taken, declared, two.Coverage.Report())
	}
}
