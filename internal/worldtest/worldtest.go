// Package worldtest holds checks that every protocol explored through
// protocol/world runs the same way: the examples' tests call them.
package worldtest

import (
	"testing"

	"github.com/rrefkit/rref/explore"
	"github.com/rrefkit/rref/protocol/world"
)

// SleepSetsKeepEveryState explores each world with and without sleep sets
// (symmetry off in both, as explore does not combine them) and fails the
// test unless both reach the same states, the same verdict and a failing
// schedule as short: the world's footprints may skip orders of steps that
// commute, never a state.
func SleepSetsKeepEveryState(t *testing.T, worlds map[string]world.Config) {
	t.Helper()
	for name, cfg := range worlds {
		t.Run(name, func(t *testing.T) {
			start, err := world.Start(cfg)
			if err != nil {
				t.Fatal(err)
			}
			reduced := explore.Explore(start, explore.Options{NoSymmetry: true})
			full := explore.Explore(start, explore.Options{NoSleepSets: true, NoSymmetry: true})
			if reduced.Truncated != "" || full.Truncated != "" {
				t.Fatalf("incomplete: %q, %q", reduced.Truncated, full.Truncated)
			}
			if reduced.States != full.States || reduced.Passed() != full.Passed() || len(reduced.Trace) != len(full.Trace) {
				t.Fatalf("with sleep sets %d states, passed %v, trace of %d; without %d, %v, %d",
					reduced.States, reduced.Passed(), len(reduced.Trace), full.States, full.Passed(), len(full.Trace))
			}
			if reduced.Transitions > full.Transitions {
				t.Errorf("with sleep sets %d transitions, more than the %d without", reduced.Transitions, full.Transitions)
			}
			t.Logf("%d states; transitions %d with sleep sets, %d without", full.States, reduced.Transitions, full.Transitions)
		})
	}
}
