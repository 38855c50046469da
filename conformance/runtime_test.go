package conformance

import (
	"fmt"
	"strings"
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

// TestRuntimeScalesToDozensOfWorkers: a handle passed along a chain of 32
// workers, fetched at the end, released everywhere, and the group settles
// (worker.SettleGroup) and shuts down clean.
func TestRuntimeScalesToDozensOfWorkers(t *testing.T) {
	defer goleak.VerifyNone(t)
	const n = 32
	var b strings.Builder
	b.WriteString("workers")
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, " W%d", i)
	}
	b.WriteString("\nremote W1 W2 x 7\n")
	for i := 1; i < n; i++ {
		fmt.Fprintf(&b, "pass W%d W%d x x\n", i, i+1)
	}
	fmt.Fprintf(&b, "fetch W%d x\nexpect value W%d x 7\n", n, n)
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "release W%d x\n", i)
	}
	b.WriteString("settle\nexpect clean\n")
	sc, err := Parse("chain32.rref", []byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	r := ExploreRuntime(sc, 2, 1)
	if r.Skipped != "" || r.Violation != nil || r.Runs != 2 {
		t.Fatalf("%+v", r)
	}
}
