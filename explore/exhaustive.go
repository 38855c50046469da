package explore

import (
	"bytes"
	"fmt"
	"hash/maphash"
	"math/rand"
	"runtime"
	"runtime/metrics"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// stateKey is a state's 128-bit fingerprint: two independent 64-bit hashes
// of its encoding. Two distinct states collide with odds of about n²/2¹²⁹
// for n states: for the default bound, under one in 10²⁵.
type stateKey [2]uint64

// hasher fingerprints state encodings. Its seeds are random per process:
// fingerprints are never stored or compared across runs.
type hasher struct{ a, b maphash.Seed }

func newHasher() hasher { return hasher{maphash.MakeSeed(), maphash.MakeSeed()} }

func (h hasher) key(b []byte) stateKey {
	return stateKey{maphash.Bytes(h.a, b), maphash.Bytes(h.b, b)}
}

// memoryEvery is how many new states a worker explores between two reads of
// the heap size, and memoryPeriod the longest time between two: a read costs
// about a microsecond, one state of a wide model can cost milliseconds.
const (
	memoryEvery  = 512
	memoryPeriod = 50 * time.Millisecond
)

// search is one exhaustive exploration, shared by its workers.
type search[M Model[M]] struct {
	opt   Options
	began time.Time
	hash  hasher
	memo  *memo
	// live is the state graph kept for Options.Liveness (nil: not
	// checked), and start the start state's key in it, set by worker 0.
	live  *liveGraph
	start stateKey

	stop   atomic.Bool // a violation or a bound: every worker unwinds
	cyclic atomic.Bool
	steps  atomic.Int64 // transitions taken, by every worker

	mu        sync.Mutex // guards the fields below
	failed    bool
	failing   []int      // the first failing schedule found
	failedBy  *Violation // what failed on it, when a panic: the model's Violation says nothing
	truncated string
	reported  time.Duration // when Progress was last told
	lastGC    time.Time     // when overMemory last collected
}

// halt stops the search for a bound; the first reason given is kept.
func (s *search[M]) halt(why string) {
	s.mu.Lock()
	if s.truncated == "" && !s.failed {
		s.truncated = why
	}
	s.mu.Unlock()
	s.stop.Store(true)
}

// fail stops the search for a violation found at the end of path: v, or
// when v is nil the model's own.
func (s *search[M]) fail(path []int, v *Violation) {
	s.mu.Lock()
	if !s.failed {
		s.failed, s.failing, s.failedBy = true, slices.Clone(path), v
		s.truncated = ""
	}
	s.mu.Unlock()
	s.stop.Store(true)
}

// checkBounds is run on every new state: depth, states and time on each,
// progress and memory when due (they take the search's lock).
func (w *worker[M]) checkBounds(depth int) bool {
	s := w.s
	if depth > s.opt.MaxDepth {
		s.halt(fmt.Sprintf("depth bound %d reached", s.opt.MaxDepth))
		return false
	}
	if int(s.memo.size.Load()) > s.opt.MaxStates {
		s.halt(fmt.Sprintf("state bound %d reached", s.opt.MaxStates))
		return false
	}
	now := time.Since(s.began)
	if s.opt.Timeout > 0 && now > s.opt.Timeout {
		s.halt(fmt.Sprintf("time bound %v reached", s.opt.Timeout))
		return false
	}
	w.sinceCheck++
	if w.sinceCheck < memoryEvery && now-w.lastCheck < memoryPeriod {
		return true
	}
	w.sinceCheck, w.lastCheck = 0, now
	if heapBytes() > s.opt.MaxMemory && s.overMemory() {
		s.halt(fmt.Sprintf("memory bound %d MiB reached", s.opt.MaxMemory>>20))
		return false
	}
	if s.opt.Progress != nil {
		s.progress(now)
	}
	return true
}

// progress tells Options.Progress of the search, at most every
// ProgressEvery. The lock is released however the callback returns: a
// panic in it is recovered as a failure, which takes the lock.
func (s *search[M]) progress(now time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if now-s.reported >= ProgressEvery {
		s.reported = now
		s.opt.Progress(int(s.memo.size.Load()), now)
	}
}

// overMemory is called when the heap holds more than the bound: it
// collects, so that garbage does not count, and reports whether what is
// live still exceeds it. It collects at most once per gcEvery.
func (s *search[M]) overMemory() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if time.Since(s.lastGC) < gcEvery {
		return false
	}
	runtime.GC()
	s.lastGC = time.Now()
	return heapBytes() > s.opt.MaxMemory
}

// gcEvery spaces the collections a search forces when its heap is over
// the memory bound: a collection of a large heap takes a while.
const gcEvery = time.Second

// heapBytes is the live and not yet swept heap, as the GC accounts it.
func heapBytes() uint64 {
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(sample)
	if sample[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return sample[0].Value.Uint64()
}

// worker explores depth-first from the start state. Worker 0 takes the
// choices in the model's order; the others in a shuffled order of their own,
// so that they spread over the state graph and meet in the shared memo.
type worker[M Model[M]] struct {
	s   *search[M]
	rng *rand.Rand // nil for worker 0
	buf []byte
	// canon keys states: by class under a Symmetric model's renamings.
	canon *canonizer[M]
	path  []int
	// log mirrors path for the watchdog of a time bound (watched).
	log *stepLog
	// onPath holds the states on the path from the start: a step back to
	// one closes a cycle, which is not followed again.
	onPath map[stateKey]bool
	// sinceCheck and lastCheck time the checks of memory and progress.
	sinceCheck int
	lastCheck  time.Duration
	// reduce turns the sleep sets on: the model is a Commuter; reorder is
	// set when it is a Reorderer too.
	reduce  bool
	reorder bool
	// recycle is set when the model is a Recycler.
	recycle bool
	// reached is the key of the state the last call of dfs entered, when
	// reachedSet, for the liveness graph's edge to it.
	reached    stateKey
	reachedSet bool
	// The stacks below hold one frame per state on the path, pushed when
	// the state is explored and popped after: no allocation per state.
	// sleep holds each state's sleep set, which grows by the steps taken
	// from it; a child's set is built above it. footprints holds the
	// footprints of the steps taken, which sleepers point into; events the
	// events of each state's choices; take the positions to take.
	sleep      []sleeper
	footprints []Footprint
	events     []choiceEvent
	take       []int
	choices    []int
	asleep     []Event // scratch for the memo's answer
	left       []Event // scratch for what a state left asleep
	only       []Event // scratch for the steps a state explored before takes
	// For the liveness graph: the agents of each state's choices, by
	// position (under weak fairness), and the steps taken from it.
	agents    []string
	liveEdges []pendingEdge
}

// sleeper is a step asleep in a state: taken already from an ancestor, or
// from this state, and independent of every step taken since, so that
// taking it here reaches only states reached through the other order.
type sleeper struct {
	ev Event
	fp int32 // in worker.footprints
}

type choiceEvent struct {
	ev       Event
	commutes bool
}

func asleepIn(set []sleeper, ev Event) bool {
	return slices.ContainsFunc(set, func(x sleeper) bool { return x.ev == ev })
}

// dfs explores m, whose sleep set is w.sleep[lo:].
func (w *worker[M]) dfs(m M, depth, lo int) memoEntry {
	s := w.s
	if s.stop.Load() {
		return memoEntry{}
	}
	if m.Violation() != nil {
		s.fail(w.path, nil)
		return memoEntry{}
	}
	k := s.hash.key(w.canon.encode(m))
	w.reached, w.reachedSet = k, true
	if depth == 0 && w.rng == nil {
		s.start = k
	}
	if w.onPath[k] {
		s.cyclic.Store(true)
		return memoEntry{}
	}
	e, done, asleep := s.memo.enter(k, w.reduce, w.asleep)
	w.asleep = asleep
	var only []Event // a state explored before: take only these steps
	if done {
		// Explored from another path: its longest schedule from here must
		// fit the depth bound from this one too.
		if depth+int(e.height) > s.opt.MaxDepth {
			s.halt(fmt.Sprintf("depth bound %d reached", s.opt.MaxDepth))
		}
		if !w.reduce {
			return e
		}
		// Steps asleep then but awake now were taken from this state by no
		// one: take them, with what sleeps in both as the sleep set.
		only = w.only[:0] // read only by awake, before any child reuses it
		for _, ev := range asleep {
			if !asleepIn(w.sleep[lo:], ev) {
				only = append(only, ev)
			}
		}
		w.only = only
		if len(only) == 0 {
			return e
		}
		kept := w.sleep[:lo]
		for _, x := range w.sleep[lo:] {
			if slices.Contains(asleep, x.ev) {
				kept = append(kept, x)
			}
		}
		w.sleep = kept
	} else if !w.checkBounds(depth) {
		return memoEntry{}
	}
	choiceBase := len(w.choices)
	w.choices = append(w.choices, m.Choices()...) // the model may reuse its slice
	choices := w.choices[choiceBase:]
	if len(choices) == 0 {
		m.CheckEnd()
		if m.Violation() != nil {
			s.fail(w.path, nil)
			return memoEntry{}
		}
		e := memoEntry{schedules: 1}
		s.memo.put(k, e, nil)
		return e
	}
	evBase, takeBase, fpBase := len(w.events), len(w.take), len(w.footprints)
	agentBase, edgeBase := len(w.agents), len(w.liveEdges)
	defer func() {
		w.events, w.take, w.footprints = w.events[:evBase], w.take[:takeBase], w.footprints[:fpBase]
		w.choices = w.choices[:choiceBase]
		w.agents, w.liveEdges = w.agents[:agentBase], w.liveEdges[:edgeBase]
		w.reached = k // the children set it to theirs
	}()
	hot := false
	if s.live != nil {
		// Asked before any step: the last step taken steps m itself.
		hot = any(m).(Hotter).Hot() != ""
		if s.opt.WeakFairness {
			for _, c := range choices {
				w.agents = append(w.agents, agentOf(m, c))
			}
		}
	}
	take := w.awake(m, choices, lo, only)
	events := w.events[evBase:]
	entered := len(w.sleep) - lo // the sleep set on entry; steps taken join it
	var before []byte            // m's encoding, when clones are checked
	if s.opt.CheckClones {
		before = m.AppendState(nil)
	}
	w.onPath[k] = true
	defer delete(w.onPath, k)
	var total memoEntry
	for i, pos := range take {
		// The last step taken steps m itself: nothing reads m after it, and
		// a state with one choice then costs no copy at all.
		top := len(w.sleep)
		reorder := w.reorder && top > lo && s.memo.size.Load() > int64(s.opt.ReorderAfter)
		// The step is on the path before the model's calls that take it:
		// a panic in them is blamed on it.
		w.path = append(w.path, pos)
		w.log.push(pos)
		n := m
		cloned := i < len(take)-1 || reorder
		if cloned {
			n = m.Clone() // a Reorderer is asked about m, with what sleeps, after the step
		}
		n.Step(choices[pos])
		s.steps.Add(1)
		commutes := w.reduce && events[pos].commutes
		if commutes {
			// The child's sleep set: what sleeps here, or was taken here
			// before, and is independent of this step.
			w.footprints = append(w.footprints, *any(n).(Commuter).Footprint())
			fp := &w.footprints[len(w.footprints)-1]
			for _, x := range w.sleep[lo:top] {
				fx := &w.footprints[x.fp]
				if fx.Independent(fp) || reorder && any(m).(Reorderer).Commutes(x.ev, events[pos].ev, fx, fp) {
					w.sleep = append(w.sleep, x)
				}
			}
		}
		w.reachedSet = false
		e := w.dfs(n, depth+1, top)
		if s.live != nil && w.reachedSet {
			w.liveEdges = append(w.liveEdges, pendingEdge{to: w.reached, pos: int32(pos)})
		}
		if cloned && w.recycle {
			any(n).(Recycler).Recycle() // its subtree is done: nothing reads n again
		}
		w.sleep = w.sleep[:top]
		if commutes {
			w.sleep = append(w.sleep, sleeper{ev: events[pos].ev, fp: int32(len(w.footprints) - 1)})
		}
		if before != nil && i < len(take)-1 {
			if w.buf = m.AppendState(w.buf[:0]); !bytes.Equal(w.buf, before) {
				s.halt(fmt.Sprintf("clone check: stepping a clone with %s changed the state it was cloned from (schedule %s)",
					m.Describe(choices[pos]), formatSchedule(w.path)))
			}
		}
		w.path = w.path[:len(w.path)-1]
		w.log.pop()
		if s.stop.Load() {
			if s.live != nil {
				// The steps taken so far, for a search a bound stopped: a
				// cycle through them is one all the same, and the search
				// for one starts from the start state, the last published.
				s.live.publish(k, hot, w.agents[agentBase:], w.liveEdges[edgeBase:])
			}
			return memoEntry{} // a bound stops the siblings too, not only the branch
		}
		total.schedules += e.schedules
		total.height = max(total.height, e.height+1)
	}
	left := w.left[:0] // what slept on entry was not taken from here
	for _, x := range w.sleep[lo : lo+entered] {
		left = append(left, x.ev)
	}
	w.left = left
	w.sleep = w.sleep[:lo]
	if s.live != nil && !s.live.publish(k, hot, w.agents[agentBase:], w.liveEdges[edgeBase:]) {
		s.halt(fmt.Sprintf("liveness graph bound %d states or transitions reached", maxLive))
		return memoEntry{}
	}
	s.memo.put(k, total, left)
	return total
}

// awake pushes the events of m's choices on w.events and the positions of
// the choices to take on w.take, in this worker's order, and returns the
// latter: every choice, or under sleep sets those not asleep in
// w.sleep[lo:] (and, when only is set, among only).
func (w *worker[M]) awake(m M, choices []int, lo int, only []Event) []int {
	base := len(w.take)
	for pos := range choices {
		w.take = append(w.take, pos)
	}
	if w.rng != nil {
		order := w.take[base:]
		w.rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	}
	if !w.reduce {
		return w.take[base:]
	}
	c := any(m).(Commuter)
	evBase := len(w.events)
	for _, choice := range choices {
		ev, ok := c.Event(choice)
		w.events = append(w.events, choiceEvent{ev: ev, commutes: ok})
	}
	events := w.events[evBase:]
	return slices.DeleteFunc(w.take[base:], func(pos int) bool {
		ev := events[pos]
		if !ev.commutes {
			return only != nil
		}
		return asleepIn(w.sleep[lo:], ev.ev) || only != nil && !slices.Contains(only, ev.ev)
	})
}

// exhaustive explores every order depth-first with memoised state
// fingerprints, counting schedules exactly; on a failure it searches
// breadth-first for the shortest schedule that fails.
func exhaustive[M Model[M]](start func() M, opt Options, began time.Time, watch *watch) Result {
	s := &search[M]{opt: opt, began: began, hash: newHasher(), memo: newMemo()}
	first := start() // worker 0's start, and what the model is
	_, commuter := any(first).(Commuter)
	_, hotter := any(first).(Hotter)
	liveness := opt.Liveness || opt.WeakFairness
	if liveness && hotter {
		s.live = newLiveGraph(opt.WeakFairness)
	}
	// Weak fairness is judged per agent, and a renaming renames agents:
	// a cycle of classes says nothing of which agent steps on the model's
	// own cycle. Symmetry is off meanwhile.
	symOpt := opt
	symOpt.NoSymmetry = opt.NoSymmetry || opt.WeakFairness
	canon, err := newCanonizer(first, symOpt)
	if err != nil {
		return Result{Refused: err, Truncated: err.Error()}
	}
	symmetric := canon.perms != nil
	// Sleep sets keep every state, not every transition: a cycle, or a
	// step a cycle leaves waiting, may be among those they skip. The
	// events a state left asleep are named as in the state explored,
	// which another state of its class names otherwise: under symmetry,
	// the memo cannot tell which steps of the other were taken.
	reduce := commuter && !opt.NoSleepSets && s.live == nil && !symmetric
	_, reorderer := any(first).(Reorderer)
	_, recycler := any(first).(Recycler)
	workers := opt.Workers
	if workers < 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	workers = max(workers, 1)
	var (
		r    Result
		once sync.Once
		wg   sync.WaitGroup
	)
	stopCoverage := startCoverage(func() M { return first }, opt)
	for i := range workers {
		w := &worker[M]{s: s, onPath: map[stateKey]bool{}, reduce: reduce, canon: canon.clone(), log: watch.log(fmt.Sprintf("searcher %d", i))}
		w.reorder = reorderer && reduce
		w.recycle = recycler
		if i > 0 {
			w.rng = rand.New(rand.NewSource(int64(i)))
		}
		m := first
		if i > 0 {
			m = start()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer w.log.finish()
			defer func() {
				// A panic in the model's code fails the search on the
				// schedule that met it: dfs puts a step on w.path before
				// taking it, and the unwinding leaves the path as it was.
				if v := recover(); v != nil {
					s.fail(w.path, panicked(v))
				}
			}()
			total := w.dfs(m, 0, 0)
			if !s.stop.Load() {
				once.Do(func() { r.Schedules = total.schedules })
				// This worker covered the whole graph, and the others only
				// duplicate what it did, unless the graph has a cycle: a
				// state another worker marked done may then have been cut
				// at a step back onto that worker's own path, which only
				// that worker goes on to explore. All then finish.
				if !s.cyclic.Load() {
					s.stop.Store(true)
				}
			}
		}()
	}
	wg.Wait()
	stopCoverage(&r)
	r.States = int(s.memo.size.Load())
	r.Cyclic = s.cyclic.Load()
	r.Transitions = s.steps.Load()
	if symmetric {
		r.Renamings = len(canon.perms)
	}
	if reduce {
		// Sleep sets skip orders: the schedules through the state graph
		// are not all walked, so they are not counted.
		r.Reduced, r.Schedules = true, 0
	}
	// A search stopped short reports the distinct states it entered.
	entered := int(min(s.memo.size.Load(), int64(opt.MaxStates)))
	if r.Cyclic {
		// Schedules that go round a cycle are infinitely many, and which
		// back edges a search meets depends on its order: no count.
		r.Schedules = 0
	}
	if s.failed {
		r.States = entered
		r.Schedules = 0
		reportShortest(start, opt, canon.clone(), began, s.failing, s.failedBy, &r)
		return r
	}
	if s.live != nil && reportLasso(start, opt, s.hash, canon.clone(), s.live, s.start, s.truncated, &r) {
		if s.truncated != "" {
			r.States = entered
		}
		r.Schedules = 0
		return r
	}
	r.Truncated = s.truncated
	if r.Truncated != "" {
		// A partial search: the states it entered, and no schedule count.
		r.States, r.Schedules = entered, 0
	}
	if liveness && !hotter && r.Truncated == "" {
		r.Truncated = "liveness unchecked: the model reports no hot states (it is no explore.Hotter)"
	}
	return r
}

// reportLasso looks in the state graph the search kept for a cycle of hot
// states, and reports it in r as a lasso, replayed, when there is one.
// truncated is why the search stopped short, if it did: a lasso in the
// part it explored is one all the same, but a shorter way into another
// may run through states it did not enter.
func reportLasso[M Model[M]](start func() M, opt Options, hash hasher, canon *canonizer[M], g *liveGraph, from stateKey, truncated string, r *Result) bool {
	l, found := g.lasso(from)
	if !found {
		return false
	}
	prefix, cycle := l.prefix, l.cycle
	if canon.perms != nil {
		// The graph's states are classes, its steps numbered as in the
		// state of each class the search explored: the model's own lasso
		// is found again through the model's own states.
		var why string
		if prefix, cycle, why = realizeLasso(start, opt, hash, canon, g, l); why != "" {
			r.Violation = &Violation{Invariant: "symmetry", Detail: why}
			r.Schedule, r.NotShortest = prefix, "the failure does not replay"
			return true
		}
	}
	res := ReplayLasso(start, prefix, cycle, opt.WeakFairness)
	r.Violation, r.Trace, r.Schedule, r.Cycle, r.CycleTrace = res.Violation, res.Trace, prefix, cycle, res.CycleTrace
	switch {
	case res.Violation == nil:
		r.Violation = &Violation{Invariant: "replay", Detail: fmt.Sprintf(
			"a cycle of hot states was found (schedule %s, then cycle %s) but its replay does not go round it: the model is not a function of its schedule (a step reads state outside the model, or a cache went stale)",
			formatSchedule(prefix), formatSchedule(cycle))}
		r.NotShortest = "the failure does not replay"
	case res.Violation.Invariant != LivenessInvariant:
		r.NotShortest = "the replay met another failure than the cycle the search found"
	case truncated != "":
		r.NotShortest = fmt.Sprintf("the search stopped short (%s): a shorter schedule may lead into a cycle of hot states through states it did not enter", truncated)
	default:
		r.Shortest = true
	}
	return true
}

// reportShortest sets r's violation, trace and schedule from failing, the
// schedule the depth-first search failed on (met: what failed, for a
// panic), or from a shorter one the breadth-first search finds, and says
// whether the schedule reported is the shortest that fails.
func reportShortest[M Model[M]](start func() M, opt Options, canon *canonizer[M], began time.Time, failing []int, met *Violation, r *Result) {
	path, found, why := shortest(start, opt, canon, began, len(failing))
	if found {
		if res, ok := confirm(start, path, nil); ok {
			r.Violation, r.Trace, r.Schedule, r.Shortest = res.Violation, res.Trace, path, true
			return
		}
		why = fmt.Sprintf("schedule %s failed in the breadth-first search but not on replay", formatSchedule(path))
	}
	res, ok := confirm(start, failing, met)
	r.Violation, r.Trace, r.Schedule = res.Violation, res.Trace, failing
	switch {
	case ok:
		r.Shortest, r.NotShortest = why == "", why
	case why == "":
		r.NotShortest = "the failure does not replay"
	default:
		r.NotShortest = "the failure does not replay; " + why
	}
}

type bfsNode[M any] struct {
	m      M
	parent int
	choice int // position in the parent's Choices()
	depth  int // steps from the start
}

// shortest searches breadth-first, within the search's bounds (the time
// bound counts from began), for a schedule of at most longest steps that
// fails, and returns the first it finds, a shortest. It searches to
// longest, not short of it, so that which of several shortest schedules
// is reported does not depend on the depth-first search's workers. Without
// one, why is empty when every shorter schedule passes, and otherwise says
// what stopped the search and what it showed. A panic in the model's code
// fails the schedule it was met on.
//
// Under symmetry it keeps one state of each class, as the depth-first
// search does: a state renamed fails in as many steps as the state.
func shortest[M Model[M]](start func() M, opt Options, canon *canonizer[M], began time.Time, longest int) (path []int, found bool, why string) {
	if longest == 0 {
		return nil, false, "" // the start fails: nothing is shorter
	}
	hash := newHasher()
	var (
		nodes   []bfsNode[M]
		seen    = map[stateKey]bool{}
		choices []int // the model may reuse its slice in a child's Choices
		// at is the node being expanded and pos the choice taken from it
		// (-1: none yet), for the schedule a panic is blamed on.
		at, pos = -1, -1
	)
	pathTo := func(i int, last ...int) []int {
		var path []int
		for j := i; j >= 0 && nodes[j].parent >= 0; j = nodes[j].parent {
			path = append(path, nodes[j].choice)
		}
		slices.Reverse(path)
		return append(path, last...)
	}
	defer func() {
		if v := recover(); v != nil {
			path, found, why = pathTo(at), true, ""
			if pos >= 0 {
				path = append(path, pos)
			}
		}
	}()
	// enter checks a state reached by a schedule of depth steps and keeps
	// it to expand if its successors are no longer than longest; it reports
	// whether the state fails. The violation is checked before the state
	// is de-duplicated, since the state may have been reached before
	// without one; the end checks when the state is entered, so that a
	// failing end is found before longer schedules are.
	enter := func(m M, parent, choice, depth int) bool {
		if m.Violation() != nil {
			return true
		}
		k := hash.key(canon.encode(m))
		if seen[k] {
			return false
		}
		seen[k] = true
		if len(m.Choices()) == 0 {
			m.CheckEnd()
			return m.Violation() != nil
		}
		if depth < longest {
			nodes = append(nodes, bfsNode[M]{m: m, parent: parent, choice: choice, depth: depth})
		}
		return false
	}
	if enter(start(), -1, 0, 0) {
		return nil, true, ""
	}
	for at = 0; at < len(nodes); at++ {
		passed := nodes[at].depth // every schedule this long passes
		if len(seen) >= opt.MaxStates {
			why = fmt.Sprintf("state bound %d", opt.MaxStates)
		} else if opt.Timeout > 0 && time.Since(began) > opt.Timeout {
			why = fmt.Sprintf("time bound %v", opt.Timeout)
		} else if at%memoryEvery == 0 && heapBytes() > opt.MaxMemory {
			why = fmt.Sprintf("memory bound %d MiB", opt.MaxMemory>>20)
		}
		if why != "" && passed+1 >= longest {
			return nil, false, "" // what is left is no shorter than the schedule in hand
		}
		if why != "" {
			return nil, false, fmt.Sprintf("the breadth-first search for a shorter failing schedule stopped at the %s with every schedule of up to %d steps passing: the shortest has %d to %d",
				why, passed, passed+1, longest)
		}
		m := nodes[at].m
		choices = append(choices[:0], m.Choices()...)
		for p, c := range choices {
			pos = p
			n := m.Clone()
			n.Step(c)
			if enter(n, at, p, nodes[at].depth+1) {
				return pathTo(at, p), true, ""
			}
		}
		pos = -1
		var zero M
		nodes[at].m = zero // free what is no longer needed
	}
	return nil, false, ""
}
