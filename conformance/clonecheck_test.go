package conformance

import (
	"strings"
	"testing"
	"time"
)

// TestClonesShareNothingWritten explores the corpus and the enumerated
// programs with explore's clone check, encodings computed afresh: a step of
// one world that writes a core, program state or monitor record it shares
// with a sibling (the copy-on-write's one way to go wrong, silently) stops
// the search with the step named.
func TestClonesShareNothingWritten(t *testing.T) {
	scs, err := Corpus()
	if err != nil {
		t.Fatal(err)
	}
	check := func(sc *Scenario) {
		for _, unreduced := range []bool{false, true} {
			r := Explore(sc, Options{MaxStates: 20000, Timeout: 30 * time.Second, Unreduced: unreduced, checkClones: true})
			if strings.HasPrefix(r.Truncated, "clone check") || !r.Passed() {
				t.Errorf("%s (unreduced %v): %v %s", sc.Name, unreduced, r.Violation, r.Truncated)
			}
		}
	}
	Enumerate(Bound{Workers: 2, Commands: 3}, func(sc *Scenario) bool {
		scs = append(scs, sc)
		return true
	})
	for _, sc := range sampled(scs) {
		if check(sc); t.Failed() {
			return
		}
	}
}
