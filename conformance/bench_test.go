package conformance

import (
	"testing"
	"time"
)

// heaviest are the corpus scenarios with the most states: the speed of
// the search is measured on them.
var heaviest = []string{"crashed_parent_cut_child_passes.rref", "crashed_middle_cut_chain.rref", "multi_layer_nesting.rref"}

// BenchmarkExploreHeaviest explores the heaviest scenarios on one worker
// and reports distinct states per second.
func BenchmarkExploreHeaviest(b *testing.B) {
	scs, err := Corpus()
	if err != nil {
		b.Fatal(err)
	}
	byName := map[string]*Scenario{}
	for _, sc := range scs {
		byName[sc.Name] = sc
	}
	for _, name := range heaviest {
		sc := byName[name]
		if sc == nil {
			b.Fatalf("no scenario %s", name)
		}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			states := 0
			var spent time.Duration
			for b.Loop() {
				r := Explore(sc, Options{Workers: 1})
				if !r.Passed() || r.Truncated != "" {
					b.Fatal(r.Violation, r.Truncated)
				}
				states += r.States
				spent += r.Duration
			}
			b.ReportMetric(float64(states)/spent.Seconds(), "states/s")
		})
	}
}
