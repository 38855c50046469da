package explore

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

// graph is a model that walks an explicit state graph; node 0 is the start.
type graph struct {
	adj     [][]int
	at      int
	reverse bool          // offer the successors in reverse order
	delay   time.Duration // per step, to interleave workers
}

func (g *graph) Choices() []int {
	out := slices.Clone(g.adj[g.at])
	if g.reverse {
		slices.Reverse(out)
	}
	return out
}
func (g *graph) Step(c int) {
	if g.delay > 0 {
		time.Sleep(g.delay)
	}
	g.at = c
}
func (g *graph) Clone() *graph               { n := *g; return &n }
func (g *graph) AppendState(b []byte) []byte { return fmt.Appendf(b, "%d", g.at) }
func (g *graph) Violation() *Violation       { return nil }
func (g *graph) CheckEnd()                   {}
func (g *graph) Describe(c int) string       { return fmt.Sprint("to ", c) }
func (g *graph) ChoiceKey(c int) string      { return fmt.Sprint(c) }

// A -> B, A -> C, B <-> C, B -> E, B -> F, C -> E. Six schedules go round
// no cycle: ABE ABF ABCE ACE ACBE ACBF.
var cyclicAdj = [][]int{0: {1, 2}, 1: {2, 3, 4}, 2: {1, 3}, 3: nil, 4: nil}

// A cyclic graph's schedules are infinitely many, and the count a memoised
// search would give depends on the order it meets the back edges in (an
// adversarial review found 4 one way and 5 the other): a cyclic search
// reports its states, whatever the order, and no count.
func TestCyclicSearchReportsNoCount(t *testing.T) {
	fwd := Explore(func() *graph { return &graph{adj: cyclicAdj} }, Options{Workers: 1})
	rev := Explore(func() *graph { return &graph{adj: cyclicAdj, reverse: true} }, Options{Workers: 1})
	t.Logf("forward: states %d schedules %v cyclic %v; reverse: states %d schedules %v cyclic %v",
		fwd.States, fwd.Schedules, fwd.Cyclic, rev.States, rev.Schedules, rev.Cyclic)
	for _, r := range []Result{fwd, rev} {
		if !r.Cyclic || r.Schedules != 0 || r.States != 5 || !r.Complete() {
			t.Errorf("cyclic %v, %v schedules, %d states, complete %v", r.Cyclic, r.Schedules, r.States, r.Complete())
		}
	}
}

// And on several workers, whichever finishes first.
func TestCyclicCountDoesNotDependOnWorkers(t *testing.T) {
	one := Explore(func() *graph { return &graph{adj: cyclicAdj} }, Options{Workers: 1})
	seen := map[float64]int{}
	for range 40 {
		r := Explore(func() *graph { return &graph{adj: cyclicAdj, delay: 200 * time.Microsecond} }, Options{Workers: 3})
		seen[r.Schedules]++
	}
	t.Logf("workers 1: %v; workers 3: %v", one.Schedules, seen)
	if len(seen) != 1 || seen[one.Schedules] == 0 {
		t.Errorf("workers 1 counts %v schedules, workers 3 counted %v", one.Schedules, seen)
	}
}

// MaxDepth holds on every path, also one into a state explored from a
// shorter path (the memo keeps each state's longest schedule): whichever
// order the choices come in, 0 -> 3 (end) and 0 -> 1 -> 2 -> 3 with
// MaxDepth 2 is incomplete.
func TestDepthBoundHoldsOnEveryPath(t *testing.T) {
	adj := [][]int{0: {1, 3}, 1: {2}, 2: {3}, 3: nil}
	fwd := Explore(func() *graph { return &graph{adj: adj} }, Options{Workers: 1, MaxDepth: 2})
	rev := Explore(func() *graph { return &graph{adj: adj, reverse: true} }, Options{Workers: 1, MaxDepth: 2})
	t.Logf("forward: truncated %q schedules %v; reverse: truncated %q schedules %v", fwd.Truncated, fwd.Schedules, rev.Truncated, rev.Schedules)
	if (fwd.Truncated == "") != (rev.Truncated == "") {
		t.Errorf("one state graph, MaxDepth 2: forward order %q, reverse order %q (reverse counted a 3-step schedule as covered)", fwd.Truncated, rev.Truncated)
	}
}
