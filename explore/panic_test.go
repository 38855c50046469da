package explore

import (
	"strings"
	"testing"
)

// TestPanicIsAViolation: a panic in the model's Step, Clone, Choices,
// AppendState, monitor (Violation) or end check is a violation with the
// schedule that met it, the shortest, and the panic's stack; its replay
// meets the same panic. It used to end the process.
func TestPanicIsAViolation(t *testing.T) {
	cases := []struct {
		method string
		steps  int    // in the shortest schedule that meets it
		detail string // in the violation's detail
	}{
		// The step into (2, 1) panics: it is the last of the schedule.
		{"Step", 3, "assignment to entry in nil map"},
		// Copying (2, 1) to take a step from it: that step is blamed.
		{"Clone", 4, "cannot copy this state"},
		{"Choices", 3, "no choices here"},
		{"AppendState", 3, "cannot encode this state"},
		{"Violation", 3, "monitor broke at 2,1"},
		// The end check runs in the final state, (3, 3).
		{"CheckEnd", 6, "end check broke"},
	}
	for _, c := range cases {
		start := func() *grid { return &grid{n: 3, panicIn: c.method, px: 2, py: 1} }
		for _, workers := range []int{1, 2} {
			r := Explore(start, Options{Workers: workers})
			v := r.Violation
			if v == nil || v.Invariant != PanicInvariant {
				t.Fatalf("%s, %d workers: got %v", c.method, workers, v)
			}
			if !strings.Contains(v.Detail, "(*grid)."+c.method) || !strings.Contains(v.Detail, c.detail) {
				t.Errorf("%s: detail %q names neither the method nor the panic", c.method, v.Detail)
			}
			if !strings.Contains(v.Stack, "(*grid)."+c.method) || !strings.Contains(v.Stack, "panic") {
				t.Errorf("%s: stack does not show the panic:\n%s", c.method, v.Stack)
			}
			if len(r.Schedule) != c.steps || len(r.Trace) != c.steps || !r.Shortest {
				t.Errorf("%s: schedule %v, trace %q, shortest %v (%s); want %d steps", c.method, r.Schedule, r.Trace, r.Shortest, r.NotShortest, c.steps)
			}
			if testing.Verbose() && workers == 1 {
				t.Logf("%s: %v\n%s", c.method, v, strings.Join(r.Trace, "\n"))
			}
			again := Replay(start, r.Schedule)
			if again.Violation == nil || again.Violation.Detail != v.Detail {
				t.Errorf("%s: replay of %v: %v", c.method, r.Schedule, again.Violation)
			}
		}
	}
}

// TestPanicInAWalk: a random or PCT walk that meets a panic reports it
// with its schedule and seed, and the seed meets it again.
func TestPanicInAWalk(t *testing.T) {
	start := func() *grid { return &grid{n: 3, panicIn: "Step", px: 1, py: 1} }
	for _, mode := range []Mode{Random, PCT} {
		r := Explore(start, Options{Mode: mode, Walks: 100})
		if r.Violation == nil || r.Violation.Invariant != PanicInvariant || r.Violation.Stack == "" || len(r.Schedule) != 2 {
			t.Fatalf("%s: %v on %v", mode, r.Violation, r.Schedule)
		}
		again := Explore(start, Options{Mode: mode, Seed: r.Seed, Walks: 1})
		if again.Violation == nil || again.Violation.Invariant != PanicInvariant {
			t.Errorf("%s: seed %d: %v", mode, r.Seed, again.Violation)
		}
	}
}

// panicsInFootprint is procs as a Commuter whose Footprint panics after
// the first step: a call neither the breadth-first search nor Replay
// makes, so the panic is reported as the depth-first search met it.
type panicsInFootprint struct{ *procs }

func (p panicsInFootprint) Clone() panicsInFootprint { return panicsInFootprint{p.procs.Clone()} }
func (p panicsInFootprint) Event(c int) (Event, bool) {
	return Event{uint64(c), uint64(p.at[c])}, true
}
func (p panicsInFootprint) Footprint() *Footprint {
	panic("no footprint")
}

// TestPanicInACallReplayDoesNotMake: the panic is reported with its stack
// and schedule, and the result says it is not proved shortest.
func TestPanicInACallReplayDoesNotMake(t *testing.T) {
	r := Explore(func() panicsInFootprint { return panicsInFootprint{newProcs(2, 2)} }, Options{Workers: 1})
	v := r.Violation
	if v == nil || v.Invariant != PanicInvariant || !strings.Contains(v.Stack, "Footprint") || len(r.Schedule) != 1 {
		t.Fatalf("%v on %v", v, r.Schedule)
	}
	if r.Shortest || !strings.Contains(r.NotShortest, "does not replay") {
		t.Errorf("shortest %v, %q", r.Shortest, r.NotShortest)
	}
}
