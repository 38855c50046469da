package explore

import (
	"fmt"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

// shared is a model for the sleep sets: processes run fixed programs of
// steps over a few shared variables, each step reading one and writing
// another (x[w] = x[r] + own), so that some pairs of steps commute and some
// do not. Its footprints are exact. Reaching a variable's target value is
// a violation, on the step that does it.
type shared struct {
	progs  [][]op
	pc     []int
	x      []int
	target int // a violation when a variable reaches it (0: none)
	failed *Violation
	fp     Footprint
}

type op struct{ r, w, add int }

const (
	tableVar = iota
	tablePC
)

func (s *shared) Choices() []int {
	var out []int
	for p, pc := range s.pc {
		if pc < len(s.progs[p]) {
			out = append(out, p)
		}
	}
	return out
}

func (s *shared) Step(p int) {
	s.fp.Reset()
	o := s.progs[p][s.pc[p]]
	s.pc[p]++
	s.fp.Write(Location(tablePC, uint64(p)))
	s.fp.Read(Location(tableVar, uint64(o.r)))
	s.fp.Write(Location(tableVar, uint64(o.w)))
	s.x[o.w] = s.x[o.r] + o.add
	if s.target != 0 && s.x[o.w] == s.target && s.failed == nil {
		s.failed = &Violation{Invariant: "target", Detail: fmt.Sprint(s.x)}
	}
}

func (s *shared) Clone() *shared {
	n := *s
	n.pc, n.x = slices.Clone(s.pc), slices.Clone(s.x)
	return &n
}

func (s *shared) AppendState(b []byte) []byte { return fmt.Appendf(b, "%v%v", s.pc, s.x) }
func (s *shared) Violation() *Violation       { return s.failed }
func (s *shared) CheckEnd()                   {}
func (s *shared) Describe(c int) string       { return fmt.Sprintf("p%d step %d", c, s.pc[c]) }
func (s *shared) ChoiceKey(c int) string      { return fmt.Sprint(c, s.pc[c]) }
func (s *shared) Event(c int) (Event, bool)   { return Event{uint64(c), uint64(s.pc[c])}, true }
func (s *shared) Footprint() *Footprint       { return &s.fp }

// TestSleepSetsEnterEveryState: on random programs, the search with sleep
// sets enters exactly the states of the full search and reaches the same
// verdict, on one worker and on three, and takes no more transitions.
func TestSleepSetsEnterEveryState(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		vars := rapid.IntRange(1, 4).Draw(t, "vars")
		progs := make([][]op, rapid.IntRange(2, 4).Draw(t, "procs"))
		for p := range progs {
			progs[p] = make([]op, rapid.IntRange(1, 4).Draw(t, "steps"))
			for i := range progs[p] {
				progs[p][i] = op{rapid.IntRange(0, vars-1).Draw(t, "r"), rapid.IntRange(0, vars-1).Draw(t, "w"), rapid.IntRange(0, 2).Draw(t, "add")}
			}
		}
		target := rapid.IntRange(0, 6).Draw(t, "target")
		start := func() *shared {
			return &shared{progs: progs, pc: make([]int, len(progs)), x: make([]int, vars), target: target}
		}
		full := Explore(start, Options{Workers: 1, NoSleepSets: true})
		for _, workers := range []int{1, 3} {
			r := Explore(start, Options{Workers: workers})
			if !r.Reduced || full.Reduced {
				t.Fatalf("Reduced: %v with sleep sets, %v without", r.Reduced, full.Reduced)
			}
			if r.Passed() != full.Passed() {
				t.Fatalf("%d workers: verdict %v with sleep sets, %v without", workers, r.Violation, full.Violation)
			}
			if full.Passed() && r.States != full.States {
				t.Fatalf("%d workers: %d states with sleep sets, %d without", workers, r.States, full.States)
			}
			if workers == 1 && full.Passed() && r.Transitions > full.Transitions {
				t.Fatalf("%d transitions with sleep sets, %d without", r.Transitions, full.Transitions)
			}
		}
	})
}

// TestSleepSetsPruneIndependentSteps: processes that share nothing have
// one order that matters; the search still enters all 4³ states, but takes
// one edge into each state: 63 transitions instead of the grid's 144.
func TestSleepSetsPruneIndependentSteps(t *testing.T) {
	progs := [][]op{{{0, 0, 1}, {0, 0, 1}, {0, 0, 1}}, {{1, 1, 1}, {1, 1, 1}, {1, 1, 1}}, {{2, 2, 1}, {2, 2, 1}, {2, 2, 1}}}
	start := func() *shared { return &shared{progs: progs, pc: make([]int, 3), x: make([]int, 3)} }
	full := Explore(start, Options{Workers: 1, NoSleepSets: true})
	r := Explore(start, Options{Workers: 1})
	if r.States != 64 || full.States != 64 || full.Schedules != 1680 {
		t.Fatalf("%d states reduced, %d full (%g schedules)", r.States, full.States, full.Schedules)
	}
	// Without sleep sets every edge of the 4x4x4 grid is taken: 3·3·4·4.
	// With them, each state is entered by one edge: 63.
	if full.Transitions != 144 || r.Transitions != 63 {
		t.Errorf("%d transitions with sleep sets, %d without; want 63 and 144", r.Transitions, full.Transitions)
	}
}

// adder is shared with a Reorderer: two steps that add to the one variable
// they read (x[w] += add) commute although their footprints conflict,
// unless a target watches the values they pass through.
type adder struct{ *shared }

func (a adder) Clone() adder { return adder{a.shared.Clone()} }

func (a adder) Commutes(x, y Event, fx, fy *Footprint) bool {
	ox, oy := a.progs[x[0]][x[1]], a.progs[y[0]][y[1]]
	return a.target == 0 && x[0] != y[0] && ox.r == ox.w && oy.r == oy.w && ox.w == oy.w &&
		fx.IndependentExcept(fy, Location(tableVar, uint64(ox.w)))
}

// TestReordererEntersEveryState: with a Reorderer's answers the search
// still enters exactly the states of the full search, with its verdict, on
// one worker and on three; and on processes that only add to one variable,
// it takes fewer transitions than sleep sets alone.
func TestReordererEntersEveryState(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		vars := rapid.IntRange(1, 3).Draw(t, "vars")
		progs := make([][]op, rapid.IntRange(2, 4).Draw(t, "procs"))
		for p := range progs {
			progs[p] = make([]op, rapid.IntRange(1, 4).Draw(t, "steps"))
			for i := range progs[p] {
				v := rapid.IntRange(0, vars-1).Draw(t, "v")
				r := v
				if rapid.Bool().Draw(t, "copy") {
					r = rapid.IntRange(0, vars-1).Draw(t, "r")
				}
				progs[p][i] = op{r, v, rapid.IntRange(0, 2).Draw(t, "add")}
			}
		}
		target := rapid.SampledFrom([]int{0, 0, 3}).Draw(t, "target")
		start := func() adder {
			return adder{&shared{progs: progs, pc: make([]int, len(progs)), x: make([]int, vars), target: target}}
		}
		full := Explore(start, Options{Workers: 1, NoSleepSets: true})
		for _, workers := range []int{1, 3} {
			r := Explore(start, Options{Workers: workers, ReorderAfter: -1})
			if r.Passed() != full.Passed() || full.Passed() && r.States != full.States {
				t.Fatalf("%d workers: %d states (%v) reordered, %d (%v) in full", workers, r.States, r.Violation, full.States, full.Violation)
			}
		}
	})
	one := [][]op{{{0, 0, 1}, {0, 0, 1}}, {{0, 0, 2}, {0, 0, 2}}, {{0, 0, 3}}}
	start := func() adder { return adder{&shared{progs: one, pc: make([]int, 3), x: make([]int, 1)}} }
	sleepOnly := Explore(func() *shared { return start().shared }, Options{Workers: 1})
	reordered := Explore(start, Options{Workers: 1, ReorderAfter: -1})
	if reordered.States != sleepOnly.States || reordered.Transitions >= sleepOnly.Transitions {
		t.Errorf("reordered: %d states, %d transitions; sleep sets alone: %d, %d",
			reordered.States, reordered.Transitions, sleepOnly.States, sleepOnly.Transitions)
	}
}
