package explore

import (
	"fmt"
	"math/rand"
	"slices"
	"strings"
	"testing"
)

// hotGraph is a graph whose listed nodes are hot.
type hotGraph struct {
	*graph
	hot     []int
	panicAt int // Hot panics in this node (0: never; node 0 is the start)
}

func (g hotGraph) Clone() hotGraph { return hotGraph{g.graph.Clone(), g.hot, g.panicAt} }
func (g hotGraph) Hot() string {
	if g.panicAt > 0 && g.at == g.panicAt {
		panic("hot of a broken node")
	}
	if slices.Contains(g.hot, g.at) {
		return fmt.Sprint("node ", g.at)
	}
	return ""
}

func hotStart(adj [][]int, hot ...int) func() hotGraph {
	return func() hotGraph { return hotGraph{graph: &graph{adj: adj}, hot: hot} }
}

// The lasso's prefix is a shortest way into a hot cycle, though the
// depth-first search meets a deeper one first: 0 -> 1 -> 2 <-> 3 is found
// before 0 -> 5, a node with a step to itself.
func TestLassoTakesTheShortestWayIn(t *testing.T) {
	adj := [][]int{0: {1, 5}, 1: {2}, 2: {3}, 3: {2}, 4: nil, 5: {5}}
	r := Explore(hotStart(adj, 2, 3, 5), Options{Liveness: true})
	if r.Violation == nil || r.Violation.Invariant != LivenessInvariant {
		t.Fatalf("violation %v", r.Violation)
	}
	if !slices.Equal(r.Schedule, []int{1}) || !slices.Equal(r.Cycle, []int{0}) || !r.Shortest {
		t.Errorf("lasso %v then %v (shortest %v), want [1] then [0]: into node 5, then round its step to itself", r.Schedule, r.Cycle, r.Shortest)
	}
}

// A cycle through a node that is not hot, and hot nodes on no cycle, are
// no violation; a hot end is CheckEnd's to judge, not liveness's.
func TestNoHotCycleNoViolation(t *testing.T) {
	for name, g := range map[string]func() hotGraph{
		"cycle 1-2-1, 2 not hot":    hotStart([][]int{0: {1}, 1: {2}, 2: {1}}, 0, 1),
		"every node hot, no cycle":  hotStart([][]int{0: {1, 2}, 1: {2}, 2: nil}, 0, 1, 2),
		"hot cycle 1-2 via 3 cold":  hotStart([][]int{0: {1}, 1: {2}, 2: {3}, 3: {1}}, 1, 2),
		"nothing hot, a self-loop":  hotStart([][]int{0: {0, 1}, 1: nil}),
		"hot start, cold self-loop": hotStart([][]int{0: {1}, 1: {1}}, 0),
	} {
		r := Explore(g, Options{Liveness: true})
		if !r.Passed() || !r.Complete() {
			t.Errorf("%s: %v (%s)", name, r.Violation, r.Truncated)
		}
	}
}

// A hot cycle as long as the search is deep, through the start: the lasso
// has no prefix, and the cycle goes all the way round.
func TestLongHotCycle(t *testing.T) {
	const n = 5000 // far deeper than a recursive search of the graph would like
	adj := make([][]int, n)
	hot := make([]int, n)
	for i := range adj {
		adj[i], hot[i] = []int{(i + 1) % n}, i
	}
	r := Explore(hotStart(adj, hot...), Options{Liveness: true, MaxDepth: 2 * n})
	if r.Violation == nil || r.Violation.Invariant != LivenessInvariant || len(r.Schedule) != 0 || len(r.Cycle) != n {
		t.Fatalf("violation %v, prefix of %d, cycle of %d: want a lasso of no prefix and a cycle of %d", r.Violation, len(r.Schedule), len(r.Cycle), n)
	}
}

// A panic in Hot is a violation like any in the model's code, on the
// schedule into the state it was asked of.
func TestPanicInHot(t *testing.T) {
	start := func() hotGraph {
		return hotGraph{graph: &graph{adj: [][]int{0: {1}, 1: {2}, 2: {1}}}, hot: []int{1, 2}, panicAt: 2}
	}
	r := Explore(start, Options{Liveness: true})
	if r.Violation == nil || r.Violation.Invariant != PanicInvariant || !slices.Equal(r.Schedule, []int{0, 0}) {
		t.Fatalf("violation %v on %v, want a panic on [0 0]", r.Violation, r.Schedule)
	}
	if res := ReplayLasso(start, []int{0}, []int{0, 0}, false); res.Violation == nil || res.Violation.Invariant != PanicInvariant {
		t.Errorf("the lasso's replay: %v, want the panic met again", res.Violation)
	}
}

// hotRounds is the rounds model, a Commuter, with its states hot while
// variable 0 is not 0.
type hotRounds struct{ *rounds }

func (h hotRounds) Clone() hotRounds { return hotRounds{h.rounds.Clone()} }
func (h hotRounds) Hot() string {
	if h.x[0] != 0 {
		return "x0 is set"
	}
	return ""
}

// Liveness turns the sleep sets off: they keep every state but skip
// transitions, and with them cycles. The search with Liveness takes every
// transition the search without sleep sets takes, and finds the same lasso
// on one worker or three.
func TestLivenessTakesEveryOrder(t *testing.T) {
	progs := [][]op{{{1, 2, 1}, {0, 0, 1}, {0, 1, 1}}, {{0, 1, 1}, {2, 1, 0}}, {{0, 1, 2}, {1, 0, 1}}}
	start := func() hotRounds { return hotRounds{&rounds{progs: progs, pc: make([]int, 3), x: make([]int, 3)}} }
	reduced := Explore(start, Options{})
	full := Explore(start, Options{NoSleepSets: true})
	live := Explore(start, Options{Liveness: true})
	t.Logf("sleep sets: %d transitions; none: %d; liveness: %d, %v", reduced.Transitions, full.Transitions, live.Transitions, live.Violation)
	if !reduced.Reduced || reduced.Transitions >= full.Transitions {
		t.Fatalf("the sleep sets saved nothing here (%d of %d transitions): the test shows nothing", reduced.Transitions, full.Transitions)
	}
	if live.Reduced || live.Transitions != full.Transitions {
		t.Errorf("liveness: reduced %v, %d transitions, want %d", live.Reduced, live.Transitions, full.Transitions)
	}
	if live.Violation == nil || live.Violation.Invariant != LivenessInvariant {
		t.Fatalf("liveness: %v", live.Violation)
	}
	for range 10 {
		r := Explore(start, Options{Liveness: true, Workers: 3})
		if !slices.Equal(r.Schedule, live.Schedule) || !slices.Equal(r.Cycle, live.Cycle) {
			t.Fatalf("3 workers: %v then %v; 1 worker: %v then %v", r.Schedule, r.Cycle, live.Schedule, live.Cycle)
		}
	}
}

// agentGraph walks an explicit graph whose edges are agents' steps.
type agentGraph struct {
	adj [][]agentEdge
	hot []bool
	at  int
}

type agentEdge struct {
	to    int
	agent string
}

func (g *agentGraph) Choices() []int {
	out := make([]int, len(g.adj[g.at]))
	for i := range out {
		out[i] = i
	}
	return out
}
func (g *agentGraph) Step(c int)                  { g.at = g.adj[g.at][c].to }
func (g *agentGraph) Clone() *agentGraph          { n := *g; return &n }
func (g *agentGraph) AppendState(b []byte) []byte { return fmt.Appendf(b, "%d", g.at) }
func (g *agentGraph) Violation() *Violation       { return nil }
func (g *agentGraph) CheckEnd()                   {}
func (g *agentGraph) Describe(c int) string {
	return fmt.Sprintf("%s to %d", g.adj[g.at][c].agent, g.adj[g.at][c].to)
}
func (g *agentGraph) ChoiceKey(c int) string { return g.Describe(c) }
func (g *agentGraph) Agent(c int) string     { return g.adj[g.at][c].agent }
func (g *agentGraph) Hot() string {
	if g.hot[g.at] {
		return "hot"
	}
	return ""
}

// onBadCycle is the oracle: by brute force over every set of steps between
// hot nodes reachable from node 0, the nodes that lie on a closed walk of
// hot nodes (under weak fairness, one on which every agent enabled in all
// its nodes takes a step). A set of steps is a closed walk exactly when
// it is strongly connected.
func onBadCycle(g *agentGraph, fair bool) []bool {
	n := len(g.adj)
	reach := make([]bool, n)
	reach[0] = true
	for changed := true; changed; {
		changed = false
		for u := range n {
			for _, e := range g.adj[u] {
				if reach[u] && !reach[e.to] {
					reach[e.to], changed = true, true
				}
			}
		}
	}
	type step struct{ from, to int }
	var steps []step
	for u := range n {
		for i, e := range g.adj[u] {
			if reach[u] && g.hot[u] && g.hot[e.to] {
				steps = append(steps, step{u, i})
			}
		}
	}
	bad := make([]bool, n)
	for set := 1; set < 1<<len(steps); set++ {
		in := make([]bool, n)
		taken := map[string]bool{}
		succ := make([][]int, n)
		pred := make([][]int, n)
		first := -1
		for i, s := range steps {
			if set&(1<<i) == 0 {
				continue
			}
			e := g.adj[s.from][s.to]
			in[s.from], in[e.to] = true, true
			taken[e.agent] = true
			succ[s.from] = append(succ[s.from], e.to)
			pred[e.to] = append(pred[e.to], s.from)
			first = s.from
		}
		covers := func(next [][]int) bool {
			seen := make([]bool, n)
			seen[first] = true
			stack := []int{first}
			for len(stack) > 0 {
				u := stack[len(stack)-1]
				stack = stack[:len(stack)-1]
				for _, v := range next[u] {
					if !seen[v] {
						seen[v] = true
						stack = append(stack, v)
					}
				}
			}
			for v := range n {
				if in[v] && !seen[v] {
					return false
				}
			}
			return true
		}
		if !covers(succ) || !covers(pred) {
			continue
		}
		if fair {
			ok := true
			for _, e := range g.adj[first] {
				throughout := true
				for v := range n {
					if in[v] && !slices.ContainsFunc(g.adj[v], func(x agentEdge) bool { return x.agent == e.agent }) {
						throughout = false
					}
				}
				ok = ok && (!throughout || taken[e.agent])
			}
			if !ok {
				continue
			}
		}
		for v := range n {
			bad[v] = bad[v] || in[v]
		}
	}
	return bad
}

// On random graphs of agents' steps, the search reports a lasso exactly
// when the brute-force oracle finds a violating closed walk, with a
// prefix as short as the shortest way to a node on one, and its lasso
// replays (the search replays it before reporting it).
func TestLivenessAgainstBruteForce(t *testing.T) {
	const (
		graphs   = 2000
		maxNodes = 5
		maxOut   = 3
		maxSteps = 12 // steps between hot nodes: 2^12 sets for the oracle
	)
	rng := rand.New(rand.NewSource(36))
	agents := []string{"a", "b", "c"}
	tried := 0
	found := [2]int{} // graphs with a bad cycle, without fairness and with
	for tried < graphs {
		n := 1 + rng.Intn(maxNodes)
		g := &agentGraph{adj: make([][]agentEdge, n), hot: make([]bool, n)}
		hotSteps := 0
		for u := range n {
			g.hot[u] = rng.Intn(3) > 0
			for range rng.Intn(maxOut + 1) {
				e := agentEdge{to: rng.Intn(n), agent: agents[rng.Intn(len(agents))]}
				g.adj[u] = append(g.adj[u], e)
				if g.hot[u] && g.hot[e.to] {
					hotSteps++
				}
			}
		}
		if hotSteps > maxSteps {
			continue
		}
		tried++
		for i, fair := range []bool{false, true} {
			bad := onBadCycle(g, fair)
			want := -1 // the length of the shortest way into a node on a bad cycle
			dist := map[int]int{0: 0}
			queue := []int{0}
			for len(queue) > 0 && want < 0 {
				u := queue[0]
				queue = queue[1:]
				if bad[u] {
					want = dist[u]
					break
				}
				for _, e := range g.adj[u] {
					if _, ok := dist[e.to]; !ok {
						dist[e.to] = dist[u] + 1
						queue = append(queue, e.to)
					}
				}
			}
			r := Explore(func() *agentGraph { return g.Clone() }, Options{Liveness: true, WeakFairness: fair})
			switch {
			case want < 0 && r.Violation != nil:
				t.Fatalf("fair %v, graph %v hot %v: reported %v (%v then %v), the oracle finds no bad cycle", fair, g.adj, g.hot, r.Violation, r.Trace, r.CycleTrace)
			case want >= 0 && (r.Violation == nil || r.Violation.Invariant != LivenessInvariant):
				t.Fatalf("fair %v, graph %v hot %v: %v, the oracle finds a bad cycle %d steps in", fair, g.adj, g.hot, r.Violation, want)
			case want >= 0 && (len(r.Schedule) != want || !r.Shortest):
				t.Fatalf("fair %v, graph %v hot %v: prefix %v (shortest %v), want %d steps", fair, g.adj, g.hot, r.Schedule, r.Shortest, want)
			}
			if want >= 0 {
				found[i]++
			}
		}
	}
	t.Logf("%d graphs: %d with a hot cycle, %d with a weakly fair one", graphs, found[0], found[1])
	if found[1] == 0 || found[1] == found[0] {
		t.Errorf("the graphs do not tell fair cycles from unfair ones: the test shows little")
	}
}

// A search a bound stops reports a hot cycle it entered before the bound,
// from what it took so far, and says why its prefix may not be the
// shortest. Node 0 leads to the hot cycle 1 <-> 2 and to a long chain
// the state bound stops.
func TestLassoInABoundedSearch(t *testing.T) {
	const chain = 100 // nodes, far past the bound
	adj := [][]int{0: {1, 3}, 1: {2}, 2: {1}}
	for i := 3; i < 3+chain; i++ {
		adj = append(adj, []int{i + 1})
	}
	adj = append(adj, nil)
	r := Explore(hotStart(adj, 1, 2), Options{Liveness: true, MaxStates: chain / 2})
	if r.Violation == nil || r.Violation.Invariant != LivenessInvariant {
		t.Fatalf("violation %v (truncated %q)", r.Violation, r.Truncated)
	}
	if !slices.Equal(r.Schedule, []int{0}) || !slices.Equal(r.Cycle, []int{0, 0}) || r.Shortest || !strings.Contains(r.NotShortest, "state bound") {
		t.Errorf("lasso %v then %v, shortest %v (%q): want [0] then [0 0], not known to be the shortest for the bound", r.Schedule, r.Cycle, r.Shortest, r.NotShortest)
	}
	// The other way round, the bound stops the search in the chain,
	// before the cycle: incomplete, and no violation.
	if r := Explore(func() hotGraph { g := hotStart(adj, 1, 2)(); g.reverse = true; return g }, Options{Liveness: true, MaxStates: chain / 2}); r.Violation != nil || r.Complete() {
		t.Errorf("chain first: %v, truncated %q", r.Violation, r.Truncated)
	}
}
