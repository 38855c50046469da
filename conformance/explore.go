package conformance

import (
	"crypto/sha256"
	"fmt"
	"math"
	"math/rand"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rrefkit/rref/generated/rref"
)

// Mode selects how schedules are chosen.
type Mode string

const (
	Exhaustive Mode = "exhaustive" // every delivery order, with state hashing
	Random     Mode = "random"     // seeded random walks
	PCT        Mode = "pct"        // seeded priority-based schedules with change points
)

// Options bound an exploration.
type Options struct {
	Mode      Mode
	MaxStates int           // exhaustive: distinct states before giving up (0: 2,000,000)
	MaxDepth  int           // steps in one schedule (0: 10,000)
	Timeout   time.Duration // per scenario (0: none)
	Seed      int64         // random and pct: the first walk's seed
	Walks     int           // random and pct: how many schedules (0: 1000)
	Depth     int           // pct: change points (0: 3)
	Factory   CoreFactory   // nil: the production core
	// Unreduced explores every order of the steps the reductions treat as
	// commuting (see World.eager); the differential tests compare verdicts
	// with and without them.
	Unreduced bool
	// Progress, when set, is told of a long exhaustive search: the states
	// seen and the time spent, about every ProgressEvery.
	Progress func(states int, elapsed time.Duration)
}

// ProgressEvery is how often a long search reports its progress.
const ProgressEvery = 2 * time.Second

// Result is the outcome of exploring one scenario.
type Result struct {
	Scenario  string
	Mode      Mode
	Schedules float64 // complete schedules covered (exhaustive: counted exactly over the state graph)
	States    int     // distinct states visited
	Duration  time.Duration
	Violation *Violation
	Trace     []string // the shortest failing schedule found, step by step
	Schedule  []int    // the same as choice positions, for -replay
	Seed      int64    // the walk's seed, for random and pct failures
	Truncated string   // why exploration stopped early, if it did
}

// Passed reports whether no violation was found.
func (r *Result) Passed() bool { return r.Violation == nil }

// ScheduleString encodes Schedule for -replay.
func (r *Result) ScheduleString() string {
	parts := make([]string, len(r.Schedule))
	for i, c := range r.Schedule {
		parts[i] = strconv.Itoa(c)
	}
	return strings.Join(parts, ",")
}

func (o *Options) defaults() {
	if o.Mode == "" {
		o.Mode = Exhaustive
	}
	if o.MaxStates == 0 {
		o.MaxStates = 2_000_000
	}
	if o.MaxDepth == 0 {
		o.MaxDepth = 10_000
	}
	if o.Walks == 0 {
		o.Walks = 1000
	}
	if o.Depth == 0 {
		o.Depth = 3
	}
}

type stateKey [16]byte

func keyOf(w *World, buf []byte) (stateKey, []byte) {
	buf = w.AppendState(buf[:0])
	sum := sha256.Sum256(buf)
	var k stateKey
	copy(k[:], sum[:16])
	return k, buf
}

// Explore runs one scenario under opt.
func Explore(sc *Scenario, opt Options) Result {
	opt.defaults()
	start := time.Now()
	var r Result
	switch opt.Mode {
	case Random, PCT:
		r = walks(sc, opt, start)
	default:
		r = exhaustive(sc, opt, start)
	}
	r.Scenario, r.Mode, r.Duration = sc.Name, opt.Mode, time.Since(start)
	return r
}

// exhaustive explores every interleaving depth-first with memoised state
// hashing, counting schedules exactly; on a failure it searches
// breadth-first for the shortest schedule that fails.
func exhaustive(sc *Scenario, opt Options, start time.Time) Result {
	var r Result
	memo := map[stateKey]float64{}
	var buf []byte
	var failed bool
	// path is the schedule to the state being explored: on a failure it is
	// a failing schedule to fall back on should the search for the
	// shortest one run out of its bounds.
	var path, failing []int
	var reported time.Duration // when Progress was last told
	var dfs func(w *World, depth int) float64
	dfs = func(w *World, depth int) float64 {
		if failed || r.Truncated != "" {
			return 0
		}
		if v := w.Violation(); v != nil {
			failed = true
			failing = slices.Clone(path)
			return 0
		}
		var k stateKey
		k, buf = keyOf(w, buf)
		if n, ok := memo[k]; ok {
			return n
		}
		if len(memo) >= opt.MaxStates {
			r.Truncated = fmt.Sprintf("state bound %d reached", opt.MaxStates)
			return 0
		}
		// Every state is checked against the time bound: in a wide scenario
		// one state's successors can take seconds to build.
		now := time.Since(start)
		if opt.Progress != nil && now-reported >= ProgressEvery {
			reported = now
			opt.Progress(len(memo), now)
		}
		if opt.Timeout > 0 && now > opt.Timeout {
			r.Truncated = fmt.Sprintf("time bound %v reached", opt.Timeout)
			return 0
		}
		if depth > opt.MaxDepth {
			r.Truncated = fmt.Sprintf("depth bound %d reached", opt.MaxDepth)
			return 0
		}
		choices := w.Choices()
		if len(choices) == 0 {
			w.CheckEnd()
			if w.Violation() != nil {
				failed = true
				failing = slices.Clone(path)
				return 0
			}
			memo[k] = 1
			return 1
		}
		var total float64
		for pos, c := range choices {
			n := w.Clone()
			n.Step(c)
			path = append(path, pos)
			total += dfs(n, depth+1)
			path = path[:len(path)-1]
			if failed || r.Truncated != "" {
				return 0 // a bound stops the siblings too, not only the branch
			}
		}
		memo[k] = total
		return total
	}
	r.Schedules = dfs(newWorld(sc, opt.Factory, opt.Unreduced), 0)
	r.States = len(memo)
	if failed {
		if !shortest(sc, opt, start, &r) {
			// The shortest schedule is beyond the bounds: report the one
			// the depth-first search found, which fails just the same.
			res := replay(sc, failing, opt.Factory, opt.Unreduced)
			r.Violation, r.Trace, r.Schedule = res.Violation, res.Trace, failing
		}
		r.Truncated = ""
	}
	return r
}

type bfsNode struct {
	w      *World
	parent int
	choice int // position in the parent's Choices()
}

// shortest finds the shortest failing schedule breadth-first, within the
// search's bounds (the time bound counts from start); it reports whether it
// found one.
func shortest(sc *Scenario, opt Options, start time.Time, r *Result) bool {
	nodes := []bfsNode{{w: newWorld(sc, opt.Factory, opt.Unreduced), parent: -1}}
	seen := map[stateKey]bool{}
	var buf []byte
	for i := 0; i < len(nodes) && len(seen) < opt.MaxStates; i++ {
		if opt.Timeout > 0 && time.Since(start) > opt.Timeout {
			return false
		}
		w := nodes[i].w
		choices := w.Choices()
		if len(choices) == 0 {
			w.CheckEnd()
		}
		if w.Violation() != nil {
			var path []int
			for j := i; nodes[j].parent >= 0; j = nodes[j].parent {
				path = append([]int{nodes[j].choice}, path...)
			}
			res := replay(sc, path, opt.Factory, opt.Unreduced)
			r.Violation, r.Trace, r.Schedule = res.Violation, res.Trace, path
			return true
		}
		for pos, c := range choices {
			n := w.Clone()
			n.Step(c)
			if n.Violation() != nil {
				// The violation is on this edge: report it before the
				// de-duplication below, since the state it leads into may
				// have been reached before without one.
				path := []int{pos}
				for j := i; nodes[j].parent >= 0; j = nodes[j].parent {
					path = append([]int{nodes[j].choice}, path...)
				}
				res := replay(sc, path, opt.Factory, opt.Unreduced)
				r.Violation, r.Trace, r.Schedule = res.Violation, res.Trace, path
				return true
			}
			var k stateKey
			k, buf = keyOf(n, buf)
			if seen[k] {
				continue
			}
			seen[k] = true
			nodes = append(nodes, bfsNode{w: n, parent: i, choice: pos})
		}
		nodes[i].w = nil // free what is no longer needed
	}
	return false
}

// Replay runs one schedule (choice positions) and reports its trace.
func Replay(sc *Scenario, schedule []int, factory CoreFactory) Result {
	return replay(sc, schedule, factory, false)
}

func replay(sc *Scenario, schedule []int, factory CoreFactory, unreduced bool) Result {
	w := newWorld(sc, factory, unreduced)
	var r Result
	r.Scenario, r.Schedule = sc.Name, schedule
	for _, pos := range schedule {
		choices := w.Choices()
		if pos < 0 || pos >= len(choices) {
			r.Violation = &Violation{Invariant: "replay", Detail: fmt.Sprintf("step %d: choice %d of %d does not exist (scenario changed?)", len(r.Trace)+1, pos, len(choices))}
			return r
		}
		r.Trace = append(r.Trace, w.Describe(choices[pos]))
		w.Step(choices[pos])
		if w.Violation() != nil {
			break
		}
	}
	if w.Violation() == nil && len(w.Choices()) == 0 {
		w.CheckEnd()
	}
	r.Violation = w.Violation()
	r.Schedules = 1
	return r
}

// ParseSchedule decodes a schedule printed by a failing run.
func ParseSchedule(s string) ([]int, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var out []int
	for _, p := range strings.Split(strings.TrimSpace(s), ",") {
		n, err := strconv.Atoi(strings.TrimSpace(p))
		if err != nil || n < 0 {
			return nil, fmt.Errorf("conformance: bad schedule step %q", p)
		}
		out = append(out, n)
	}
	return out, nil
}

// walks runs seeded random or PCT schedules; each failure replays from its seed.
func walks(sc *Scenario, opt Options, start time.Time) Result {
	var r Result
	seen := map[stateKey]bool{}
	var buf []byte
	for i := 0; i < opt.Walks; i++ {
		if opt.Timeout > 0 && time.Since(start) > opt.Timeout {
			r.Truncated = fmt.Sprintf("time bound %v reached after %d walks", opt.Timeout, i)
			break
		}
		seed := opt.Seed + int64(i)
		path, v := walk(sc, opt, seed, seen, &buf)
		r.Schedules++
		if v != nil {
			res := replay(sc, path, opt.Factory, opt.Unreduced)
			r.Violation, r.Trace, r.Schedule, r.Seed = res.Violation, res.Trace, path, seed
			break
		}
	}
	r.States = len(seen)
	return r
}

// walk runs one schedule. PCT gives every message a random priority when first
// seen, always takes the highest, and at Depth random steps demotes the top.
func walk(sc *Scenario, opt Options, seed int64, seen map[stateKey]bool, buf *[]byte) ([]int, *Violation) {
	rng := rand.New(rand.NewSource(seed))
	w := newWorld(sc, opt.Factory, opt.Unreduced)
	prio := map[string]float64{}
	changes := map[int]bool{}
	for i := 0; i < opt.Depth; i++ {
		changes[rng.Intn(64)] = true
	}
	var path []int
	for step := 0; step < opt.MaxDepth; step++ {
		var k stateKey
		k, *buf = keyOf(w, *buf)
		seen[k] = true
		choices := w.Choices()
		if len(choices) == 0 {
			w.CheckEnd()
			return path, w.Violation()
		}
		pos := rng.Intn(len(choices))
		if opt.Mode == PCT {
			best := math.Inf(-1)
			for p, c := range choices {
				key := "cmd"
				if c >= 0 {
					key = w.inflight[c].key
				}
				pr, ok := prio[key]
				if !ok {
					pr = rng.Float64()
					prio[key] = pr
				}
				if pr > best {
					best, pos = pr, p
				}
			}
			if changes[step] {
				c := choices[pos]
				key := "cmd"
				if c >= 0 {
					key = w.inflight[c].key
				}
				prio[key] = -rng.Float64()
			}
		}
		path = append(path, pos)
		w.Step(choices[pos])
		if v := w.Violation(); v != nil {
			return path, v
		}
	}
	return path, &Violation{Invariant: rref.InvariantL1, Detail: fmt.Sprintf("schedule longer than %d steps: settle does not end", opt.MaxDepth)}
}
