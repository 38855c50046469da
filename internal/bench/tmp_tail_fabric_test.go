//go:build rreffabric

package bench

import (
	"slices"
	"testing"
	"time"
)

func TestTmpFabricTail(t *testing.T) {
	ts := fabricTransports(benchConfig(false))
	r, err := ts[0].open()
	if err != nil {
		t.Fatal(err)
	}
	defer r.close()
	for round := 0; round < 3; round++ {
		samples := make([]time.Duration, 0, 1<<18)
		if _, err := r.pingPongTimed(56, 400*time.Millisecond, &samples); err != nil {
			t.Fatal(err)
		}
		slices.Sort(samples)
		p50 := samples[len(samples)/2]
		t.Logf("n %d p50 %v p99 %v ratio %.1f", len(samples), p50, samples[len(samples)*99/100], float64(samples[len(samples)*99/100])/float64(p50))
	}
}
