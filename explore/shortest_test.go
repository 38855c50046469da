package explore

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// grid is two counters, x and y, each stepped up to n: choice 0 steps x,
// choice 1 steps y. The depth-first search takes x first, so it meets a
// violation at y == failY after n steps of x that the shortest schedule
// does without. panicIn names a method that panics at (px, py).
type grid struct {
	x, y, n int
	failY   int
	panicIn string
	px, py  int
	failed  *Violation
}

func (g *grid) at() bool { return g.x == g.px && g.y == g.py }

func (g *grid) Choices() []int {
	if g.panicIn == "Choices" && g.at() {
		panic("no choices here")
	}
	var out []int
	if g.x < g.n {
		out = append(out, 0)
	}
	if g.y < g.n {
		out = append(out, 1)
	}
	return out
}

func (g *grid) Step(c int) {
	if c == 0 {
		g.x++
	} else {
		g.y++
	}
	if g.panicIn == "Step" && g.at() {
		var counts map[int]int
		counts[g.x] = g.y // a nil map: the runtime panics
	}
	if g.failY > 0 && g.y == g.failY {
		g.failed = &Violation{Invariant: "y", Detail: fmt.Sprint(g.x, g.y)}
	}
}

func (g *grid) Clone() *grid {
	if g.panicIn == "Clone" && g.at() {
		panic("cannot copy this state")
	}
	n := *g
	return &n
}

func (g *grid) AppendState(b []byte) []byte {
	if g.panicIn == "AppendState" && g.at() {
		panic("cannot encode this state")
	}
	return fmt.Appendf(b, "%d,%d", g.x, g.y)
}

func (g *grid) Violation() *Violation {
	if g.panicIn == "Violation" && g.at() {
		panic(fmt.Errorf("monitor broke at %d,%d", g.x, g.y))
	}
	return g.failed
}

func (g *grid) CheckEnd() {
	if g.panicIn == "CheckEnd" {
		panic("end check broke")
	}
}

func (g *grid) Describe(c int) string  { return [...]string{"x++", "y++"}[c] }
func (g *grid) ChoiceKey(c int) string { return fmt.Sprint(c) }

// TestShortestIsProved: the depth-first search fails after 20 steps of x
// and 5 of y; the breadth-first search finds the 5 steps of y alone and
// says they are the shortest, on any number of workers.
func TestShortestIsProved(t *testing.T) {
	start := func() *grid { return &grid{n: 20, failY: 5} }
	for _, workers := range []int{1, 2} {
		r := Explore(start, Options{Workers: workers})
		if r.Passed() || !slices.Equal(r.Schedule, []int{1, 1, 1, 1, 1}) || len(r.Trace) != 5 {
			t.Fatalf("workers %d: %v on %v", workers, r.Violation, r.Schedule)
		}
		if !r.Shortest || r.NotShortest != "" {
			t.Errorf("workers %d: shortest %v, %q", workers, r.Shortest, r.NotShortest)
		}
	}
}

// TestShortestBeyondTheBound: the depth-first search meets the failure
// after 30 steps of x and 10 of y, having entered 40 states; the
// breadth-first search would need more than the bound of 45 to reach 10
// steps. The 40 steps are reported, and the result says they may not be
// the shortest, and what the search proved. (The search used to report
// such a schedule as the shortest: 34 steps where 18 existed.)
func TestShortestBeyondTheBound(t *testing.T) {
	const bound = 45
	r := Explore(func() *grid { return &grid{n: 30, failY: 10} }, Options{Workers: 1, MaxStates: bound})
	if r.Passed() || len(r.Schedule) != 40 {
		t.Fatalf("%v on %v (%d steps), want the depth-first schedule of 40", r.Violation, r.Schedule, len(r.Schedule))
	}
	if r.Shortest || !strings.Contains(r.NotShortest, fmt.Sprintf("state bound %d", bound)) {
		t.Fatalf("shortest %v, %q", r.Shortest, r.NotShortest)
	}
	// Within d steps the grid has (d+1)(d+2)/2 states: 45 within 8, so
	// the bound stops the search once it has entered every one of those.
	if !strings.Contains(r.NotShortest, "every schedule of up to 8 steps passing: the shortest has 9 to 40") {
		t.Errorf("%q does not say what the search proved", r.NotShortest)
	}
	if !r.Complete() {
		t.Error("a failure found is a complete verdict")
	}
	if again := Explore(func() *grid { return &grid{n: 30, failY: 10} }, Options{Workers: 1}); !again.Shortest || len(again.Schedule) != 10 {
		t.Errorf("within the default bound: %d steps, shortest %v", len(again.Schedule), again.Shortest)
	}
}

// endsEarly: from the start, choice 0 leads to a state whose one step
// breaks an invariant, choice 1 to a final state whose end check fails.
// The end check's failure is one step long, the step's two.
type endsEarly struct {
	path   []int
	failed *Violation
}

func (e *endsEarly) Choices() []int {
	switch {
	case len(e.path) == 0:
		return []int{0, 1}
	case len(e.path) == 1 && e.path[0] == 0:
		return []int{0}
	}
	return nil
}
func (e *endsEarly) Step(c int) {
	e.path = append(slices.Clip(e.path), c)
	if len(e.path) == 2 {
		e.failed = &Violation{Invariant: "step"}
	}
}
func (e *endsEarly) Clone() *endsEarly           { n := *e; return &n }
func (e *endsEarly) AppendState(b []byte) []byte { return fmt.Appendf(b, "%v", e.path) }
func (e *endsEarly) Violation() *Violation       { return e.failed }
func (e *endsEarly) CheckEnd() {
	if slices.Equal(e.path, []int{1}) {
		e.failed = &Violation{Invariant: "end"}
	}
}
func (e *endsEarly) Describe(c int) string  { return fmt.Sprint(c) }
func (e *endsEarly) ChoiceKey(c int) string { return fmt.Sprint(c) }

// TestShortestCountsEndChecks: a final state's end check fails one step
// from the start, a step two steps from it: the breadth-first search ran
// end checks only when it expanded a state, after the step's failure had
// been met, and reported the two steps.
func TestShortestCountsEndChecks(t *testing.T) {
	r := Explore(func() *endsEarly { return &endsEarly{} }, Options{Workers: 1})
	if r.Passed() || r.Violation.Invariant != "end" || !slices.Equal(r.Schedule, []int{1}) || !r.Shortest {
		t.Fatalf("%v on %v (shortest %v)", r.Violation, r.Schedule, r.Shortest)
	}
}

// TestWalksSayTheyAreNotShortest: a random or PCT failure is the first met.
func TestWalksSayTheyAreNotShortest(t *testing.T) {
	for _, mode := range []Mode{Random, PCT} {
		r := Explore(func() *grid { return &grid{n: 4, failY: 2} }, Options{Mode: mode, Walks: 50})
		if r.Passed() || r.Shortest || !strings.Contains(r.NotShortest, "not the shortest") {
			t.Errorf("%s: %v, shortest %v, %q", mode, r.Violation, r.Shortest, r.NotShortest)
		}
	}
}
