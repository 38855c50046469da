package main

import (
	"testing"

	"github.com/rrefkit/rref/explore"
	"github.com/rrefkit/rref/protocol/world"
)

// TestSleepSetsKeepEveryState: the world's sleep sets skip only orders of
// steps that commute: with and without them the example's worlds, the
// correct one, the seeded bug's and a larger one, reach the same states
// and the same verdict, and the bug is found on a schedule as short.
func TestSleepSetsKeepEveryState(t *testing.T) {
	for name, cfg := range map[string]world.Config{"correct": worldConfig(3, false), "seeded bug": worldConfig(3, true), "larger": worldConfig(4, false)} {
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
			t.Logf("%d states; transitions %d with sleep sets, %d without", full.States, reduced.Transitions, full.Transitions)
		})
	}
}
