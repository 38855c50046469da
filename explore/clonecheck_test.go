package explore

import (
	"strings"
	"testing"
)

// leaky is procs whose Clone forgets to copy the counters: a sibling's step
// writes through to the state it was cloned from.
type leaky struct{ *procs }

func (l leaky) Clone() leaky {
	n := *l.procs // at is shared: the bug
	return leaky{&n}
}

// TestCheckClonesFindsSharedState: the shared counters go unnoticed without
// the check (the search even passes, over wrong states) and stop it with
// the step named when it is on; a correct model passes the check.
func TestCheckClonesFindsSharedState(t *testing.T) {
	start := func() leaky { return leaky{newProcs(2, 2)} }
	if r := Explore(start, Options{}); r.Truncated != "" || !r.Passed() {
		t.Fatalf("without the check: %+v", r)
	}
	r := Explore(start, Options{CheckClones: true})
	if !strings.Contains(r.Truncated, "clone check") || !strings.Contains(r.Truncated, "p0 steps") || r.Complete() {
		t.Fatalf("with the check: truncated %q, complete %v", r.Truncated, r.Complete())
	}
	for _, workers := range []int{1, 2} {
		good := Explore(func() *procs { return newProcs(3, 3) }, Options{CheckClones: true, Workers: workers})
		if good.Truncated != "" || good.States != 64 || good.Schedules != 1680 {
			t.Fatalf("a correct model under the check, %d workers: %+v", workers, good)
		}
	}
}

// flaky is procs whose violation depends on a counter outside the model:
// the search meets it, its replay does not.
type flaky struct {
	*procs
	calls *int
}

func (f flaky) Clone() flaky { return flaky{f.procs.Clone(), f.calls} }

func (f flaky) Step(c int) {
	f.procs.Step(c)
	*f.calls++
	if *f.calls == 5 {
		f.procs.failed = &Violation{Invariant: "flaky"}
	}
}

// TestUnreproducibleViolationFails: a violation the search met but whose
// replay does not meet it again is reported as a failure of its own, not
// dropped (the search used to report a pass).
func TestUnreproducibleViolationFails(t *testing.T) {
	calls := 0
	r := Explore(func() flaky { return flaky{newProcs(2, 2), &calls} }, Options{})
	if r.Passed() || r.Violation.Invariant != "replay" || !strings.Contains(r.Violation.Detail, "not a function of its schedule") {
		t.Fatalf("got %+v", r.Violation)
	}
}
