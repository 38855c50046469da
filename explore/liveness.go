package explore

import (
	"bytes"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
)

// Hotter is implemented by a model whose states may be hot: a state the
// system must leave, such as a client waiting for an answer (the spec's
// hot states, IsHot in the code rrefgen generates). CheckEnd sees a run
// that ends in a hot state; it cannot see one that never ends. With
// Options.Liveness the exhaustive search reports that too: a cycle of hot
// states reachable from the start, which a run can go round forever.
type Hotter interface {
	// Hot says why the state is hot (which machines are in hot states),
	// or is "" when it is not.
	Hot() string
}

// Agents is implemented by a model that says which agent (a machine, a
// process, a timer) takes each of its choices, for Options.WeakFairness.
// A model that does not is judged with each event (ChoiceKey) an agent of
// its own.
type Agents interface {
	// Agent names the agent that takes choice c, alike in every state.
	Agent(c int) string
}

// LivenessInvariant names the violation of a run that can stay in hot
// states forever. It is reported as a lasso: Result.Schedule leads from
// the start to a state on a cycle of hot states, and Result.Cycle goes
// round that cycle back to the same state.
const LivenessInvariant = "liveness"

// agentOf names the agent that takes choice c in m, for weak fairness.
func agentOf[M Model[M]](m M, c int) string {
	if a, ok := any(m).(Agents); ok {
		return a.Agent(c)
	}
	return m.ChoiceKey(c)
}

// hotIn is why m is hot, or "" when it is not or says nothing of hot states.
func hotIn[M Model[M]](m M) string {
	if h, ok := any(m).(Hotter); ok {
		return h.Hot()
	}
	return ""
}

// maxLive bounds the states, transitions and enabled agents the liveness
// graph holds: they are numbered by int32, to keep a state in 20 bytes and
// a transition in 12. That many transitions alone would take some 25 GB,
// far past the default memory bound.
const maxLive = math.MaxInt32

// liveGraph is the state graph a search with Options.Liveness keeps: every
// state whose steps it took, whether the state is hot, the agents enabled
// in it (under weak fairness), and its transitions. Cycles are looked for
// once the search is done, over the whole graph, which is exact: a check on
// the fly would have to track, for every cycle, the steps it leaves waiting.
// The search's workers add to it under mu.
type liveGraph struct {
	mu       sync.Mutex
	fair     bool
	ids      map[stateKey]int32
	nodes    []liveNode
	edges    []liveEdge
	enabled  []int32 // the agents enabled in each node, sorted: liveNode.enOff
	agentIDs map[string]int32
	agents   []string // by id
}

type liveNode struct {
	edgeOff, edgeN int32 // its edges, in the order of the model's choices
	enOff, enN     int32
	// expanded is set once the node is published: its steps were all
	// taken, or, in a search a bound stopped, those it took before.
	expanded bool
	hot      bool
}

type liveEdge struct {
	to    int32
	pos   int32 // the choice's position in the state's Choices
	agent int32 // -1 without weak fairness
}

// pendingEdge is a step a worker took from a state it is expanding, kept
// until the state is done and published.
type pendingEdge struct {
	to  stateKey
	pos int32
}

func newLiveGraph(fair bool) *liveGraph {
	return &liveGraph{fair: fair, ids: map[stateKey]int32{}, agentIDs: map[string]int32{}}
}

// id numbers k, the first time it is seen.
func (g *liveGraph) id(k stateKey) int32 {
	if id, ok := g.ids[k]; ok {
		return id
	}
	id := int32(len(g.nodes))
	g.ids[k] = id
	g.nodes = append(g.nodes, liveNode{})
	return id
}

func (g *liveGraph) agent(name string) int32 {
	if id, ok := g.agentIDs[name]; ok {
		return id
	}
	id := int32(len(g.agents))
	g.agentIDs[name] = id
	g.agents = append(g.agents, name)
	return id
}

// publish records the state k as expanded: hot or not, the agents of its
// choices by position (under weak fairness), and the steps taken from it.
// A state two workers expanded is recorded once: its steps are the same,
// or, when a bound stopped one, some of them. Every cycle through the
// steps recorded is one of the model's, and the agents enabled are all
// there, so that a lasso found in part of the graph is a lasso all the
// same. It reports false when the graph is full (maxLive).
func (g *liveGraph) publish(k stateKey, hot bool, agents []string, out []pendingEdge) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.nodes)+len(out)+1 > maxLive || len(g.edges)+len(out) > maxLive || len(g.enabled)+len(agents) > maxLive {
		return false
	}
	id := g.id(k)
	if g.nodes[id].expanded {
		return true
	}
	// The search's workers take the steps in orders of their own: sorted
	// by position, the graph, and the lasso found in it, do not depend on
	// which worker published a state.
	slices.SortFunc(out, func(a, b pendingEdge) int { return int(a.pos - b.pos) })
	n := liveNode{expanded: true, hot: hot, edgeOff: int32(len(g.edges)), edgeN: int32(len(out)), enOff: int32(len(g.enabled))}
	for _, e := range out {
		agent := int32(-1)
		if g.fair {
			agent = g.agent(agents[e.pos])
		}
		g.edges = append(g.edges, liveEdge{to: g.id(e.to), pos: e.pos, agent: agent})
	}
	if g.fair {
		for _, a := range agents {
			g.enabled = append(g.enabled, g.agent(a))
		}
		en := g.enabled[n.enOff:]
		slices.Sort(en)
		n.enN = int32(len(slices.Compact(en)))
		g.enabled = g.enabled[:n.enOff+n.enN]
	}
	g.nodes[id] = n
	return true
}

func (g *liveGraph) out(v int32) []liveEdge {
	n := &g.nodes[v]
	return g.edges[n.edgeOff : n.edgeOff+n.edgeN]
}

func (g *liveGraph) enabledIn(v int32) []int32 {
	n := &g.nodes[v]
	return g.enabled[n.enOff : n.enOff+n.enN]
}

// sccs numbers the strongly connected components of the subgraph of the
// nodes keep accepts (Tarjan's algorithm, iterative: a cycle may be as long as
// the search is deep). comp is each node's component, -1 for a node not
// kept; the members of component c are members[first[c]:first[c+1]].
func (g *liveGraph) sccs(keep func(int32) bool) (comp []int32, members []int32, first []int) {
	n := len(g.nodes)
	comp = make([]int32, n)
	index := make([]int32, n) // order of discovery, from 1; 0: not yet
	low := make([]int32, n)
	onStack := make([]bool, n)
	for v := range comp {
		comp[v] = -1
	}
	type frame struct {
		v    int32
		next int // the next of v's edges to follow
	}
	var (
		calls []frame
		stack []int32
		order int32
	)
	visit := func(v int32) {
		order++
		index[v], low[v] = order, order
		stack = append(stack, v)
		onStack[v] = true
		calls = append(calls, frame{v: v})
	}
	for root := range int32(n) {
		if index[root] != 0 || !keep(root) {
			continue
		}
		visit(root)
		for len(calls) > 0 {
			f := &calls[len(calls)-1]
			v := f.v
			if out := g.out(v); f.next < len(out) {
				w := out[f.next].to
				f.next++
				switch {
				case !keep(w):
				case index[w] == 0:
					visit(w)
				case onStack[w]:
					low[v] = min(low[v], index[w])
				}
				continue
			}
			calls = calls[:len(calls)-1]
			if len(calls) > 0 {
				u := calls[len(calls)-1].v
				low[u] = min(low[u], low[v])
			}
			if low[v] != index[v] {
				continue
			}
			c := int32(len(first))
			first = append(first, len(members))
			for {
				w := stack[len(stack)-1]
				stack = stack[:len(stack)-1]
				onStack[w] = false
				comp[w] = c
				members = append(members, w)
				if w == v {
					break
				}
			}
		}
	}
	first = append(first, len(members))
	return comp, members, first
}

// violating reports whether component c, whose nodes are mem, holds a
// cycle: more than one node, or a step from a node to itself; and, under
// weak fairness, a fair one. A strongly connected component has a cycle
// through all its nodes and edges, so it holds a fair cycle exactly when
// every agent enabled in all its nodes takes a step inside it: an agent
// disabled in some node is not continuously enabled on the cycle through
// all of them, and one enabled in all but taken nowhere inside is enabled
// throughout every cycle in it and taken on none. taken is scratch, an
// entry per agent, all false.
func (g *liveGraph) violating(c int32, mem []int32, comp []int32, taken []bool) bool {
	cycle := len(mem) > 1
	for _, v := range mem {
		for _, e := range g.out(v) {
			if e.to == v {
				cycle = true
			}
			if g.fair && comp[e.to] == c {
				taken[e.agent] = true
			}
		}
	}
	if !cycle || !g.fair {
		return cycle
	}
	throughout := slices.Clone(g.enabledIn(mem[0]))
	for _, v := range mem[1:] {
		en := g.enabledIn(v)
		throughout = slices.DeleteFunc(throughout, func(a int32) bool { _, ok := slices.BinarySearch(en, a); return !ok })
	}
	fair := true
	for _, a := range throughout {
		fair = fair && taken[a]
	}
	clear(taken)
	return fair
}

// lasso finds, in the graph searched from start, a cycle of hot states
// (under weak fairness, a fair one) and a shortest schedule into it: the
// prefix leads to the first state, breadth first, that lies on such a
// cycle, and the cycle is the shortest from it back to it (under weak
// fairness, one built to take each agent it would leave enabled
// throughout, not always the shortest). found is false when there is none.
func (g *liveGraph) lasso(start stateKey) (l lassoPath, found bool) {
	root, ok := g.ids[start]
	if !ok || !g.nodes[root].expanded {
		return l, false
	}
	comp, members, first := g.sccs(func(v int32) bool { return g.nodes[v].expanded && g.nodes[v].hot })
	bad := make([]bool, len(first)-1)
	taken := make([]bool, len(g.agents))
	some := false
	for c := range bad {
		bad[c] = g.violating(int32(c), members[first[c]:first[c+1]], comp, taken)
		some = some || bad[c]
	}
	if !some {
		return l, false
	}
	// Breadth first from the start, through every state expanded: the
	// first state met on a violating cycle.
	parent := map[int32]liveEdgeFrom{root: {from: -1}}
	queue := []int32{root}
	for len(queue) > 0 {
		v := queue[0]
		queue = queue[1:]
		if c := comp[v]; c >= 0 && bad[c] {
			for at := v; parent[at].from >= 0; at = parent[at].from {
				l.prefix = append(l.prefix, int(parent[at].pos))
				l.through = append(l.through, at)
			}
			slices.Reverse(l.prefix)
			slices.Reverse(l.through)
			l.comp, l.c = comp, c
			l.cycle, found = g.cycleFrom(v, comp)
			return l, found
		}
		if !g.nodes[v].expanded {
			continue
		}
		for _, e := range g.out(v) {
			if _, seen := parent[e.to]; !seen {
				parent[e.to] = liveEdgeFrom{from: v, pos: e.pos}
				queue = append(queue, e.to)
			}
		}
	}
	return l, false // unreachable: every expanded state was reached from the start
}

// lassoPath is a lasso in the state graph: prefix from the start into the
// component c (of comp), through the states through, then cycle back.
type lassoPath struct {
	prefix, cycle []int
	through       []int32
	comp          []int32
	c             int32
}

// keys maps each node back to its state's key.
func (g *liveGraph) keys() []stateKey {
	out := make([]stateKey, len(g.nodes))
	for k, id := range g.ids {
		out[id] = k
	}
	return out
}

type liveEdgeFrom struct {
	from int32
	pos  int32
}

// cycleFrom builds a cycle from s back to s inside s's component. Without
// fairness it is the shortest. Under weak fairness it goes, agent by agent
// (by name, for a lasso that does not depend on the search's order), to
// the nearest step of each agent that every state so far enables, or to
// the nearest state that disables it, and then back to s; the component
// is fair (violating), so one or the other is inside it.
func (g *liveGraph) cycleFrom(s int32, comp []int32) (cycle []int, ok bool) {
	c := comp[s]
	at := s
	var pending []int32 // agents enabled in every state so far and taken on no step
	if g.fair {
		pending = slices.Clone(g.enabledIn(s))
	}
	take := func(steps []liveEdge) {
		for _, e := range steps {
			cycle = append(cycle, int(e.pos))
			en := g.enabledIn(e.to)
			pending = slices.DeleteFunc(pending, func(a int32) bool {
				_, on := slices.BinarySearch(en, a)
				return a == e.agent || !on
			})
			at = e.to
		}
	}
	for len(pending) > 0 {
		x := slices.MinFunc(pending, func(a, b int32) int { return strings.Compare(g.agents[a], g.agents[b]) })
		steps, found := g.nearest(at, c, comp,
			func(e liveEdge) bool { return e.agent == x },
			func(v int32) bool { _, on := slices.BinarySearch(g.enabledIn(v), x); return !on })
		if !found {
			return nil, false
		}
		take(steps)
	}
	steps, found := g.nearest(at, c, comp, func(e liveEdge) bool { return e.to == s }, nil)
	if !found {
		return nil, false
	}
	take(steps)
	return cycle, true
}

// nearest searches breadth first inside component c from v for the first
// step that goalStep accepts, or state that goalState does (not v itself),
// and returns the steps to it.
func (g *liveGraph) nearest(v, c int32, comp []int32, goalStep func(liveEdge) bool, goalState func(int32) bool) ([]liveEdge, bool) {
	type back struct {
		from int32
		e    liveEdge
	}
	parent := map[int32]back{v: {from: -1}}
	path := func(to int32, last ...liveEdge) []liveEdge {
		steps := last
		for at := to; parent[at].from >= 0; at = parent[at].from {
			steps = append(steps, parent[at].e)
		}
		slices.Reverse(steps)
		return steps
	}
	queue := []int32{v}
	for len(queue) > 0 {
		u := queue[0]
		queue = queue[1:]
		for _, e := range g.out(u) {
			if comp[e.to] != c {
				continue
			}
			if goalStep(e) {
				return path(u, e), true
			}
			if _, seen := parent[e.to]; seen {
				continue
			}
			parent[e.to] = back{from: u, e: e}
			if goalState != nil && goalState(e.to) {
				return path(e.to), true
			}
			queue = append(queue, e.to)
		}
	}
	return nil, false
}

// ReplayLasso replays a lasso, as a liveness violation reports it: prefix
// from the model's start, then cycle. It reports a LivenessInvariant
// violation when the cycle leads back to the state the prefix reached
// (the same encoding), every state on it is hot, and, with weakFairness,
// every agent enabled in all its states takes a step on it; then the run
// can go round the cycle forever. Otherwise it reports no violation, unless
// a step fails on the way or a choice does not exist, as Replay does. It
// makes the calls the search makes, so that a panic the search met is met
// again.
func ReplayLasso[M Model[M]](start func() M, prefix, cycle []int, weakFairness bool) (r Result) {
	r = Result{Schedule: prefix, Cycle: cycle}
	defer func() {
		if v := recover(); v != nil {
			r.Violation = panicked(v)
		}
	}()
	var p replayer[M]
	m, bad := p.run(start(), prefix, &r.Trace, nil)
	if bad == nil {
		bad = m.Violation()
	}
	if bad != nil || len(cycle) == 0 {
		r.Violation = bad
		return r
	}
	entry := bytes.Clone(m.AppendState(p.buf[:0]))
	why := hotIn(m)
	hot := true
	var throughout []string // agents enabled in every state of the cycle so far
	taken := map[string]bool{}
	visit := func(m M, choices []int, pos int) {
		hot = hot && hotIn(m) != ""
		if !weakFairness {
			return
		}
		var here []string
		for _, c := range choices {
			here = append(here, agentOf(m, c))
		}
		if len(r.CycleTrace) == 0 {
			throughout = here
		} else {
			throughout = slices.DeleteFunc(throughout, func(a string) bool { return !slices.Contains(here, a) })
		}
		taken[here[pos]] = true
	}
	m, bad = p.run(m, cycle, &r.CycleTrace, visit)
	if bad == nil {
		bad = m.Violation()
	}
	if bad != nil {
		r.Violation = bad
		return r
	}
	if !hot || !bytes.Equal(m.AppendState(p.buf[:0]), entry) {
		return r
	}
	for _, a := range throughout {
		if !taken[a] {
			return r // a weakly fair scheduler would take a step of a
		}
	}
	detail := fmt.Sprintf("the run can go round a cycle of %d steps forever, every state on it hot (where it enters: %s)", len(cycle), why)
	if weakFairness {
		detail += "; every agent enabled throughout the cycle takes a step on it, so a weakly fair scheduler may keep to it"
	}
	r.Violation = &Violation{Invariant: LivenessInvariant, Detail: detail}
	return r
}
