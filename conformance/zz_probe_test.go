package conformance

import (
	"fmt"
	"testing"
	"time"
)

func TestZZProbe(t *testing.T) {
	scs, _ := Corpus()
	for _, sc := range scs {
		if sc.Name != "multi_layer_nesting.rref" && sc.Name != "crashed_middle_cut_chain.rref" && sc.Name != "crashed_parent_cut_child_passes.rref" {
			continue
		}
		for _, ra := range []int{-1, 256, 1024, 1 << 30} {
			for _, ns := range []bool{false, true} {
				best := time.Hour
				var r Result
				for range 15 {
					r = Explore(sc, Options{Workers: 1, NoSleepSets: ns, reorderAfter: ra})
					if r.Duration < best {
						best = r.Duration
					}
				}
				fmt.Printf("%-40s ra=%-10d nosleep=%v states=%d trans=%d best=%v %.0f/s\n", sc.Name, ra, ns, r.States, r.Transitions, best, float64(r.States)/best.Seconds())
			}
		}
	}
}
