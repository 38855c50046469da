package conformance

import (
	"fmt"
	"testing"
	"time"
)

// heaviest are the corpus scenarios with the most states: the speed of
// the search is measured on them.
var heaviest = []string{"crashed_parent_cut_child_passes.rref", "crashed_middle_cut_chain.rref", "multi_layer_nesting.rref"}

// corpusByName is the corpus, each scenario by its file name.
func corpusByName(tb testing.TB) map[string]*Scenario {
	tb.Helper()
	scs, err := Corpus()
	if err != nil {
		tb.Fatal(err)
	}
	byName := map[string]*Scenario{}
	for _, sc := range scs {
		byName[sc.Name] = sc
	}
	return byName
}

// BenchmarkExploreHeaviest explores the heaviest scenarios on one worker
// and reports distinct states per second, reduced and unreduced.
func BenchmarkExploreHeaviest(b *testing.B) {
	byName := corpusByName(b)
	for _, name := range heaviest {
		sc := byName[name]
		if sc == nil {
			b.Fatalf("no scenario %s", name)
		}
		for _, unreduced := range []bool{false, true} {
			label := name
			if unreduced {
				label += "/unreduced" // the yardstick: every order, no sleep sets
			}
			b.Run(label, func(b *testing.B) {
				b.ReportAllocs()
				states := 0
				var spent time.Duration
				for b.Loop() {
					r := Explore(sc, Options{Workers: 1, Unreduced: unreduced})
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
}

// chainOfSix is the measure of a long search: six users hand one
// RRef down a chain by return, and the last fetches it (37,683 states).
const chainOfSix = `workers O A B C D E F
remote A O x 7
return A B x b
return B C b c
return C D c d
return D E d e
return E F e f
fetch F f
expect value F f 7
release A x
release B b
release C c
release D d
release E e
release F f
settle
expect clean
`

// BenchmarkExploreChainOfSix explores chainOfSix on one worker and on one
// per CPU.
func BenchmarkExploreChainOfSix(b *testing.B) {
	sc, err := Parse("chain_of_six.rref", []byte(chainOfSix))
	if err != nil {
		b.Fatal(err)
	}
	for _, workers := range []int{1, -1} {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) {
			b.ReportAllocs()
			states := 0
			var spent time.Duration
			for b.Loop() {
				r := Explore(sc, Options{Workers: workers})
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
