package conformance

import (
	"testing"

	"go.uber.org/goleak"
)

// TestCorpusOnRuntime runs the corpus against real workers with randomised
// message delays: every scenario the runtime can express passes.
func TestCorpusOnRuntime(t *testing.T) {
	defer goleak.VerifyNone(t)
	scs, err := Corpus()
	if err != nil {
		t.Fatal(err)
	}
	ran := 0
	for _, sc := range scs {
		r := ExploreRuntime(sc, 3, 1)
		if r.Skipped != "" {
			t.Logf("%s: skipped: %s", sc.Name, r.Skipped)
			continue
		}
		ran++
		if r.Violation != nil {
			t.Errorf("%s (seed %d): %v", sc.Name, r.Seed, r.Violation)
		}
	}
	if ran < 35 {
		t.Errorf("only %d scenarios ran on the runtime", ran)
	}
}

// TestCorpusOnRuntimeSHM runs it again with every pair over shared memory.
func TestCorpusOnRuntimeSHM(t *testing.T) {
	if testing.Short() {
		t.Skip("maps shared memory for every pair of every scenario")
	}
	defer goleak.VerifyNone(t)
	scs, err := Corpus()
	if err != nil {
		t.Fatal(err)
	}
	for _, sc := range scs {
		if r := ExploreRuntimeOver(sc, "shm", 1, 7); r.Violation != nil {
			t.Errorf("%s (seed %d): %v", sc.Name, r.Seed, r.Violation)
		}
	}
}
