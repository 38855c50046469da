package conformance

import (
	"testing"
)

// The state bound counts distinct states, however many workers search: a
// bound the one-worker search fits in exactly fits any number of workers.
// (Workers once counted every state each of them entered.)
func TestStateBoundDoesNotDependOnWorkers(t *testing.T) {
	scs, err := Corpus()
	if err != nil {
		t.Fatal(err)
	}
	// The heaviest scenario has four times the states of the next; the
	// default run takes the next, which has as many workers searching.
	name := heaviest[1]
	if longRun {
		name = heaviest[0]
	}
	var sc *Scenario
	for _, s := range scs {
		if s.Name == name {
			sc = s
		}
	}
	one := Explore(sc, Options{Workers: 1})
	bound := one.States
	if r := Explore(sc, Options{MaxStates: bound, Workers: 1}); r.Truncated != "" {
		t.Fatalf("one worker at bound %d: %q", bound, r.Truncated)
	}
	for _, n := range []int{2, 4} {
		for _, factor := range []float64{1, 1.5, 2} {
			b := int(float64(bound) * factor)
			r := Explore(sc, Options{MaxStates: b, Workers: n})
			if r.Truncated != "" {
				t.Errorf("%s (%d distinct states): workers %d, MaxStates %d: %q, states %d", sc.Name, bound, n, b, r.Truncated, r.States)
			}
		}
	}
}
