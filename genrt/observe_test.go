package genrt_test

import (
	"testing"

	"github.com/rrefkit/rref/generated/rref"
	"github.com/rrefkit/rref/genrt"
)

type observed struct {
	m               *genrt.MachineInfo
	from, event, to int
	out             genrt.Outcome
}

// TestGeneratedStepsAreObserved: a generated step function tells the
// observer of a move and of an ignored event, each with the machine as
// declared, and of no illegal step; once the observer is unset, of nothing.
func TestGeneratedStepsAreObserved(t *testing.T) {
	var got []observed
	prev := genrt.SetStepObserver(func(m *genrt.MachineInfo, from, event, to int, out genrt.Outcome) {
		got = append(got, observed{m, from, event, to, out})
	})
	defer genrt.SetStepObserver(prev)
	if !genrt.Observing() {
		t.Fatal("an observer is set, and Observing says none is")
	}
	rref.StepFork(rref.ForkUnknown, rref.ForkOnCreate)       // moves to known
	rref.StepFork(rref.ForkKnown, rref.ForkOnRequest)        // ignored
	rref.StepFork(rref.ForkUnknown, rref.ForkOnHolderFailed) // illegal
	want := []observed{
		{&rref.ForkMachine, int(rref.ForkUnknown), int(rref.ForkOnCreate), int(rref.ForkKnown), genrt.Moved},
		{&rref.ForkMachine, int(rref.ForkKnown), int(rref.ForkOnRequest), int(rref.ForkKnown), genrt.Ignored},
	}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("observed %+v, want %+v", got, want)
	}
	genrt.SetStepObserver(nil)
	rref.StepFork(rref.ForkUnknown, rref.ForkOnCreate)
	if genrt.Observing() || len(got) != len(want) {
		t.Fatalf("observing %v after the observer was unset: %d steps", genrt.Observing(), len(got))
	}
}

// BenchmarkStepUnobserved is a generated step with no observer set, the
// cost every step pays for the hook; BenchmarkStepObserved is one with an
// observer that counts, for the ratio.
func BenchmarkStepUnobserved(b *testing.B) {
	b.ReportAllocs()
	s := rref.ForkUnknown
	for range b.N {
		s, _, _ = rref.StepFork(rref.ForkUnknown, rref.ForkOnCreate)
	}
	_ = s
}

func BenchmarkStepObserved(b *testing.B) {
	b.ReportAllocs()
	n := 0
	defer genrt.SetStepObserver(genrt.SetStepObserver(func(*genrt.MachineInfo, int, int, int, genrt.Outcome) { n++ }))
	s := rref.ForkUnknown
	for range b.N {
		s, _, _ = rref.StepFork(rref.ForkUnknown, rref.ForkOnCreate)
	}
	_ = s
	if n != b.N {
		b.Fatalf("observed %d of %d steps", n, b.N)
	}
}
