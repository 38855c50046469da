//go:build rrefmutants

package conformance

import (
	"sort"
	"testing"

	"github.com/rrefkit/rref/runtime/core"
)

// TestMutants seeds each protocol bug into the core and checks that at least
// one corpus scenario catches it. Run with: go test -tags rrefmutants ./conformance
func TestMutants(t *testing.T) {
	scs, err := Corpus()
	if err != nil {
		t.Fatal(err)
	}
	names := make([]string, 0, len(core.Mutants))
	for n := range core.Mutants {
		names = append(names, n)
	}
	sort.Strings(names)
	if len(names) < 22 {
		t.Fatalf("only %d mutants", len(names))
	}
	defer core.SetMutant(0)
	for _, name := range names {
		core.SetMutant(core.Mutants[name])
		caught := ""
		var catcher *Scenario
		var caughtBy Result
		for _, sc := range scs {
			// The world is asked about conflicting steps from the start.
			r := Explore(sc, Options{MaxStates: 50000, reorderAfter: -1})
			// Sleep sets and the cache of deliveries must not hide a bug
			// either: the same verdict without them, on every scenario.
			if f := Explore(sc, Options{MaxStates: 50000, NoSleepSets: true, noDeliveryCache: true}); verdict(f) != verdict(r) {
				t.Errorf("mutant %s: %s with sleep sets and cached deliveries, %s without in %s", name, verdict(r), verdict(f), sc.Name)
			}
			if !r.Passed() && caught == "" {
				caught = sc.Name + ": " + r.Violation.Error()
				catcher, caughtBy = sc, r
			}
		}
		if caught == "" {
			t.Errorf("mutant %s survived the whole corpus", name)
		} else {
			t.Logf("mutant %-28s caught by %s", name, caught)
		}
		// The reductions must not change what the search concludes: the
		// unreduced search catches the bug in the same scenario, by the
		// same invariant.
		if catcher != nil {
			u := Explore(catcher, Options{MaxStates: 50000, Unreduced: true})
			if verdict(u) != verdict(caughtBy) {
				t.Errorf("mutant %s: %s reduced, %s unreduced in %s", name, verdict(caughtBy), verdict(u), catcher.Name)
			}
		}
	}
}

// TestEnumerationCatchesMutants: the programs of up to three commands over
// three workers, which nobody wrote, catch these seeded bugs on their own
// (the other three need four commands over four workers:
// TestEnumerationCatchRate, behind the long tag, measures both bounds).
func TestEnumerationCatchesMutants(t *testing.T) {
	defer core.SetMutant(0)
	for _, name := range []string{"ack-unrecorded", "child-accept-early", "creator-delete-not-deferred", "cut-refused",
		"dead-child-pinned", "dead-holder-kept", "fork-request-dropped", "no-pin", "owner-death-not-to-fetches",
		"owner-deletes-on-first", "pending-release-no-delete", "timed-out-delete-early", "merged-ack-not-carried", "ack-carried-to-any-fork",
		"duplicate-fork-counted", "late-remote-recreates", "no-tombstone", "resent-remote-runs-again", "pending-released-uncounted"} {
		core.SetMutant(core.Mutants[name])
		caught := ""
		n := Enumerate(Bound{Workers: 3, Commands: 3}, func(sc *Scenario) bool {
			if r := Explore(sc, Options{MaxStates: 20000}); !r.Passed() {
				caught = r.Violation.Error()
				return false
			}
			return true
		})
		if caught == "" {
			t.Errorf("mutant %s survived %d enumerated programs", name, n)
		} else {
			t.Logf("mutant %-28s caught by enumerated program %d: %s", name, n, caught)
		}
	}
}

// TestMutantsStepsCommute runs TestIndependentStepsCommute's check under
// every mutant: a correct core never races a delete against its child's
// answer, so only a broken one shows whether the footprints record the
// monitor's reads, and a missing record would let sleep sets hide the bug.
func TestMutantsStepsCommute(t *testing.T) {
	scs, err := Corpus()
	if err != nil {
		t.Fatal(err)
	}
	defer core.SetMutant(0)
	names := make([]string, 0, len(core.Mutants))
	for n := range core.Mutants {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		core.SetMutant(core.Mutants[name])
		for _, sc := range scs {
			if _, err := checkCommuting(sc, false); err != nil {
				t.Errorf("mutant %s, %s: %v", name, sc.Name, err)
				break
			}
		}
	}
}
