package explore

import (
	"fmt"
	"slices"
	"testing"
)

// rounds is a cyclic model: three processes loop through fixed programs
// over shared variables modulo 3 (review: a search on several workers
// reported itself complete with 254 of these 258 states, 1-4 runs in 200).
type rounds struct {
	progs [][]op
	pc, x []int
	fp    Footprint
}

func (s *rounds) Choices() []int { return []int{0, 1, 2} }
func (s *rounds) Step(p int) {
	s.fp.Reset()
	o := s.progs[p][s.pc[p]]
	s.pc[p] = (s.pc[p] + 1) % len(s.progs[p])
	s.fp.Write(Location(tablePC, uint64(p)))
	s.fp.Read(Location(tableVar, uint64(o.r)))
	s.fp.Write(Location(tableVar, uint64(o.w)))
	s.x[o.w] = (s.x[o.r] + o.add) % 3
}
func (s *rounds) Clone() *rounds {
	n := *s
	n.pc, n.x = slices.Clone(s.pc), slices.Clone(s.x)
	return &n
}
func (s *rounds) AppendState(b []byte) []byte { return fmt.Appendf(b, "%v%v", s.pc, s.x) }
func (s *rounds) Violation() *Violation       { return nil }
func (s *rounds) CheckEnd()                   {}
func (s *rounds) Describe(c int) string       { return fmt.Sprint(c) }
func (s *rounds) ChoiceKey(c int) string      { return fmt.Sprint(c, s.pc[c]) }
func (s *rounds) Event(c int) (Event, bool)   { return Event{uint64(c), uint64(s.pc[c])}, true }
func (s *rounds) Footprint() *Footprint       { return &s.fp }

// TestCyclicGraphOnSeveralWorkers: on a cyclic graph, several workers
// enter every state, with or without sleep sets, every time.
func TestCyclicGraphOnSeveralWorkers(t *testing.T) {
	progs := [][]op{{{1, 2, 1}, {0, 0, 1}, {0, 1, 1}}, {{0, 1, 1}, {2, 1, 0}}, {{0, 1, 2}, {1, 0, 1}}}
	start := func() *rounds { return &rounds{progs: progs, pc: make([]int, 3), x: make([]int, 3)} }
	full := Explore(start, Options{Workers: 1, NoSleepSets: true})
	if !full.Cyclic || full.States != 258 {
		t.Fatalf("one worker: %d states, cyclic %v", full.States, full.Cyclic)
	}
	for i := 0; i < 200; i++ {
		for _, noSleep := range []bool{true, false} {
			if r := Explore(start, Options{Workers: 3, NoSleepSets: noSleep}); r.States != full.States || !r.Complete() {
				t.Fatalf("run %d, sleep sets %v: %d states, want %d (truncated %q)", i, !noSleep, r.States, full.States, r.Truncated)
			}
		}
	}
}
