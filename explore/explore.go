// Package explore is rrefkit's model checker: it runs a system under test
// through every order of its nondeterministic steps (or through seeded
// random and PCT schedules), checks the system's invariants on every step
// and its end checks on every final state, and reports the shortest
// schedule that breaks one, replayable step by step (or, when a bound
// stopped its search for the shortest, says so and why). A panic in the
// model's code is a violation too, reported with its schedule and stack.
//
// It knows nothing of any protocol. A system is explored through the
// [Model] interface: what may happen next, how to take one step, how to
// copy a state, and a canonical encoding of a state so that states reached
// by different orders are explored once. The RRef protocol's conformance
// suite (package conformance) is one model; a model of any other protocol,
// written against the Go code rrefgen generates from its spec, is another
// (see the example in this package's tests).
//
// A model that also says what each step reads and writes ([Commuter])
// lets the exhaustive search skip orders of steps that commute (sleep
// sets): every state is still entered, with far fewer transitions.
//
// A model with interchangeable instances ([Symmetric]: N clients running
// one program) lets the exhaustive search keep one state of each class of
// states alike but for the instances' names: it keys states by the least
// encoding over every renaming, and steps only the model's own states, so
// that every schedule it reports replays as it is, is the shortest, and
// the schedules are still counted exactly. Sleep sets and weak fairness,
// which name steps and agents as a renaming does not, turn it off.
//
// A model that steps state machines rrefgen generated can have the
// search report which of the spec's transitions it took and which it
// never did ([Options.Coverage], [Coverage]), counted through the step
// observer the generated code calls.
//
// End checks see a run that stops where it must not; they cannot see one
// that never stops, such as a client resending its request forever while
// it waits. A model that says which of its states are hot ([Hotter]: a
// state the system must leave) can have that checked too
// ([Options.Liveness]): the exhaustive search keeps the state graph, finds
// its strongly connected components of hot states once it is done, and
// reports a cycle of hot states reachable from the start as a lasso, a
// shortest schedule into the cycle and the cycle itself, which
// [ReplayLasso] replays. Under weak fairness ([Options.WeakFairness]), a
// cycle on which some agent ([Agents]: a machine, a timer) could step in
// every state yet never steps is one a fair scheduler leaves, and is not
// reported. Sleep sets are off while liveness is checked: they keep every
// state, not every cycle.
package explore

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"time"
)

// Model is a system under exploration, in one state. Choices are opaque
// small integers the model gives meaning to; the engine only passes back
// what Choices returned. M is the model's own type, so that Clone returns
// it without a conversion.
type Model[M any] interface {
	// Choices lists the steps enabled now, in a deterministic order; none
	// means the run is over. A model may offer two steps that do the same
	// once (two copies of one message), since exploring both finds nothing new.
	// The slice is the engine's to read until the model's next call to
	// Choices (a model may hand out the same buffer each time).
	Choices() []int
	// Step takes choice c, one of the last Choices.
	Step(c int)
	// Clone returns an independent copy of the state.
	Clone() M
	// AppendState appends a canonical encoding of the state: two states
	// encode alike exactly when no future step can tell them apart.
	AppendState(b []byte) []byte
	// Violation is the first invariant broken so far, or nil. A model
	// checks its invariants on every step.
	Violation() *Violation
	// CheckEnd runs the checks due when the run is over (no choice left):
	// liveness (nothing waits forever), no leak.
	CheckEnd()
	// Describe says what choice c does, for traces.
	Describe(c int) string
	// ChoiceKey names the event behind choice c the same way in every
	// state it is enabled in (a message's sender, receiver and bytes), so
	// that PCT keeps the event's priority across steps.
	ChoiceKey(c int) string
}

// Recycler is implemented by a model whose copies can be reused. The
// exhaustive search makes a copy for nearly every step it takes, and most
// lead into states already seen: it calls Recycle on a copy it made once
// the copy's every successor has been explored, and never touches that
// copy again, so that the model can make its next copies in the same
// memory instead of the heap's.
type Recycler interface {
	Recycle()
}

// Violation is a broken invariant or a failed expectation.
type Violation struct {
	Invariant string // the model's name for it ("S1", "L2", "mutex", "expect"), or PanicInvariant
	Line      int    // the line of the model's script to blame, when there is one
	Detail    string
	// Stack is, for a panic in the model's code, the stack of the
	// goroutine that panicked, as runtime/debug.Stack gives it.
	Stack string
}

// PanicInvariant names the violation a panic in the model's code becomes
// (in Step, Clone, Choices, AppendState, or a monitor run by Violation or
// CheckEnd): the search stops there and reports the schedule that led to
// it, instead of the panic ending the process.
const PanicInvariant = "panic"

// panicked makes the violation for value, recovered from a panic in the
// model's code. It must run in the deferred call that recovered, so that
// the stack is still the one that panicked.
func panicked(value any) *Violation {
	return &Violation{Invariant: PanicInvariant, Detail: fmt.Sprintf("the model panicked in %s: %v", raiser(), value), Stack: string(debug.Stack())}
}

// raiser names the function that raised the panic being recovered: the
// first frame below the runtime's panic machinery.
func raiser() string {
	var pcs [64]uintptr // deep enough for the deferred call, the runtime's frames and the raiser
	frames := runtime.CallersFrames(pcs[:runtime.Callers(1, pcs[:])])
	inPanic := false
	for {
		f, more := frames.Next()
		switch {
		case f.Function == "runtime.gopanic":
			inPanic = true
		case inPanic && !strings.HasPrefix(f.Function, "runtime."):
			name := f.Function[strings.LastIndexByte(f.Function, '/')+1:]
			return fmt.Sprintf("%s (%s:%d)", name, f.File[strings.LastIndexByte(f.File, '/')+1:], f.Line)
		}
		if !more {
			return "the model's code"
		}
	}
}

func (v *Violation) Error() string {
	if v.Line > 0 {
		return fmt.Sprintf("%s at line %d: %s", v.Invariant, v.Line, v.Detail)
	}
	return fmt.Sprintf("%s: %s", v.Invariant, v.Detail)
}

// Mode selects how schedules are chosen.
type Mode string

const (
	Exhaustive Mode = "exhaustive" // every order, with state hashing
	Random     Mode = "random"     // seeded random walks
	PCT        Mode = "pct"        // seeded priority-based schedules with change points
)

// Defaults of the bounds, when an Options field is zero.
const (
	// DefaultMaxStates bounds an exhaustive search: the memo costs about
	// 60 bytes a state, so the default stays near 120 MB.
	DefaultMaxStates = 2_000_000
	// DefaultMaxDepth bounds one schedule: far longer than any scenario's,
	// short enough to end a model that never settles.
	DefaultMaxDepth = 10_000
	// DefaultWalks is how many random or PCT schedules run.
	DefaultWalks = 1000
	// DefaultPCTDepth is PCT's number of priority change points: bugs of
	// depth 3 are the common case in its paper's measurements.
	DefaultPCTDepth = 3
	// DefaultReorderAfter is when a search starts asking a Reorderer: the
	// corpus's and the enumeration's small searches gain nothing by it.
	DefaultReorderAfter = 1024
	// DefaultMaxMemory bounds the heap a search may grow to: far above
	// any corpus scenario's needs, below the machines' memory.
	DefaultMaxMemory = 8 << 30
)

// ProgressEvery is how often a long search reports its progress.
const ProgressEvery = 2 * time.Second

// Options bound an exploration.
type Options struct {
	Mode      Mode
	MaxStates int           // exhaustive: distinct states entered before giving up (0: DefaultMaxStates)
	MaxDepth  int           // steps in one schedule (0: DefaultMaxDepth)
	MaxMemory uint64        // live heap bytes (after a collection) before giving up (0: DefaultMaxMemory)
	Timeout   time.Duration // the whole search (0: none)
	Seed      int64         // random and pct: the first walk's seed
	Walks     int           // random and pct: how many schedules (0: DefaultWalks)
	Depth     int           // pct: change points (0: DefaultPCTDepth)
	// A walk longer than MaxDepth stops the walks as incomplete (Truncated),
	// with its seed: the model may run forever, or need a larger bound.
	// Workers is how many goroutines an exhaustive search runs on (0: one;
	// a negative number: one per CPU). Verdicts and counts do not depend
	// on it; only which of several failing schedules is found first may.
	Workers int
	// Progress, when set, is told of a long exhaustive search: the states
	// seen and the time spent, about every ProgressEvery.
	Progress func(states int, elapsed time.Duration)
	// CheckClones re-encodes every state after each child stepped from its
	// clone has been explored, and stops the search (Truncated names the
	// step) when the state changed: a model whose Clone shares what a step
	// then writes corrupts its siblings silently, and this finds it. It
	// costs a second encoding of every state; the model's AppendState must
	// read the state itself, not encodings cached beside it, for the check
	// to see a change.
	CheckClones bool
	// NoSleepSets turns the partial-order reduction off for a model that
	// is a Commuter: every order is taken, and schedules are counted. The
	// differential tests compare the two searches.
	NoSleepSets bool
	// ReorderAfter is how many states a search enters before it asks a
	// Reorderer about steps whose footprints conflict (0:
	// DefaultReorderAfter; negative: from the start). A question costs more
	// than a small search saves with it, and asking in some states and not
	// in others is as sound as always asking: a step is only kept asleep
	// when it commutes with the step taken.
	ReorderAfter int
	// Liveness checks that no run can stay in hot states forever (the
	// model is a Hotter): a cycle of hot states reachable from the start is
	// a violation (LivenessInvariant), reported as a lasso, Schedule then
	// Cycle. The search keeps the state graph it explores, to look for
	// cycles in it once it is done: about twice the memory of a search
	// without (a million states of two steps each peaked at 230 MB instead
	// of 110). It takes every order of the steps: sleep sets keep every
	// state but not every transition, so a cycle, or the step a cycle
	// leaves waiting, may be among those they skip; a Commuter is explored
	// as under NoSleepSets. The exhaustive mode only: the walks, or a model
	// that is no Hotter, leave liveness unchecked and say so in Truncated.
	Liveness bool
	// WeakFairness is Liveness under weak fairness per agent (Agents): a
	// cycle on which some agent could take a step in every state, yet takes
	// none, is one no fair scheduler keeps to, and is not reported. A
	// Symmetric model is explored without its symmetry meanwhile: a
	// renaming renames the agents fairness is judged by.
	WeakFairness bool
	// NoSymmetry explores a Symmetric model state by state, as if it were
	// none: the differential tests compare the two searches.
	NoSymmetry bool
	// Coverage reports in Result.Coverage which of the spec's transitions
	// the search's steps took, for a model that runs machines rrefgen
	// generated (a Coverer names them, to list those never stepped too).
	// It counts through genrt's step observer, which sees every generated
	// machine in the process: searches that record coverage run one at a
	// time, and other code stepping generated machines meanwhile is
	// counted too. The steps of the search proper are counted, not those
	// of the search for a shorter failing schedule or of a replay.
	Coverage bool
}

func (o *Options) defaults() {
	if o.Mode == "" {
		o.Mode = Exhaustive
	}
	if o.MaxStates == 0 {
		o.MaxStates = DefaultMaxStates
	}
	if o.MaxDepth == 0 {
		o.MaxDepth = DefaultMaxDepth
	}
	if o.MaxMemory == 0 {
		o.MaxMemory = DefaultMaxMemory
	}
	if o.Walks == 0 {
		o.Walks = DefaultWalks
	}
	if o.Depth == 0 {
		o.Depth = DefaultPCTDepth
	}
	if o.ReorderAfter == 0 {
		o.ReorderAfter = DefaultReorderAfter
	}
}

// Result is the outcome of one exploration.
type Result struct {
	Mode      Mode
	Schedules float64 // complete schedules covered (exhaustive: counted exactly over the state graph)
	States    int     // distinct states visited
	// Transitions is how many steps the search took: each state's every
	// choice, including those into states already explored.
	Transitions int64
	Duration    time.Duration
	Violation   *Violation
	Trace       []string // the failing schedule, step by step: the shortest when Shortest is set
	Schedule    []int    // the same as choice positions, for Replay
	// Shortest reports that no schedule fails in fewer steps than
	// Schedule: the exhaustive search looked for a shorter one breadth
	// first and proved there is none (for a lasso: no shorter schedule
	// leads into a state on a cycle that violates liveness). For a failure Explore reports
	// without it, NotShortest says why: the breadth-first search stopped
	// at a bound (and how long the shortest may be), the failure does not
	// replay, or the mode (random, pct) does not look for the shortest.
	Shortest    bool
	NotShortest string
	Seed        int64  // the walk's seed, for random and pct failures
	Truncated   string // why exploration stopped early, if it did: the result is then incomplete
	// Cyclic reports that a step led back to a state on the path to it:
	// every state was still explored, but schedules that go round a cycle
	// are infinitely many, so Schedules is 0 (not counted).
	Cyclic bool
	// Reduced reports that sleep sets pruned orders of commuting steps:
	// every state was entered, but Schedules is 0 (not counted).
	Reduced bool
	// Cycle is, for a LivenessInvariant violation, the loop of a lasso:
	// choice positions that lead from the state Schedule reaches back to
	// it, every state on the way hot and, under WeakFairness, a step of
	// every agent enabled throughout taken. The run can repeat it forever.
	// Schedule is then the shortest into a state on such a cycle when
	// Shortest is set; Cycle is the shortest back to that state without
	// fairness, and under it the one found by going to each agent's nearest
	// step in turn. CycleTrace is its steps, as Trace is Schedule's.
	// ReplayLasso replays the two.
	Cycle      []int
	CycleTrace []string
	// Renamings is, for a search of a Symmetric model, how many renamings
	// of its instances it keyed states under (0: none): States then counts
	// classes of up to that many states each.
	Renamings int
	// Coverage is, under Options.Coverage, the spec transitions the
	// search's steps took and those they did not.
	Coverage *Coverage
	// Refused is why the search did not run (errors.Is ErrRefused): the
	// model's declarations, or the options with them, cannot be explored
	// soundly. Truncated says the same, so that the result is incomplete.
	Refused error
}

// Passed reports whether no violation was found.
func (r *Result) Passed() bool { return r.Violation == nil }

// Complete reports whether the search covered everything it set out to:
// it found a violation, or it passed within its bounds.
func (r *Result) Complete() bool { return r.Violation != nil || r.Truncated == "" }

// ScheduleString encodes Schedule for ParseSchedule.
func (r *Result) ScheduleString() string { return formatSchedule(r.Schedule) }

// CycleString encodes Cycle for ParseSchedule.
func (r *Result) CycleString() string { return formatSchedule(r.Cycle) }

func formatSchedule(schedule []int) string {
	parts := make([]string, len(schedule))
	for i, c := range schedule {
		parts[i] = strconv.Itoa(c)
	}
	return strings.Join(parts, ",")
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
			return nil, fmt.Errorf("explore: bad schedule step %q", p)
		}
		out = append(out, n)
	}
	return out, nil
}

// Explore runs the model that start makes under opt. start must make the
// same initial state on every call: a failing schedule is replayed from it.
func Explore[M Model[M]](start func() M, opt Options) Result {
	opt.defaults()
	began := time.Now()
	search := func(w *watch) Result {
		if opt.Mode == Random || opt.Mode == PCT {
			return walks(start, opt, began, w)
		}
		return exhaustive(start, opt, began, w)
	}
	var r Result
	if opt.Timeout > 0 {
		r = watched(start, opt, began, search) // the bound holds even if a step never returns
	} else {
		r = search(nil)
	}
	r.Mode, r.Duration = opt.Mode, time.Since(began)
	return r
}

// Replay runs one schedule (choice positions) from the model's start and
// reports its trace and verdict. It makes the calls a search makes along
// the schedule (each step is taken on a copy, each state is encoded), so
// that a panic the search met in one of them is met again: it is reported
// as a PanicInvariant violation, the step it happened in last in the trace.
func Replay[M Model[M]](start func() M, schedule []int) (r Result) {
	r = Result{Schedule: schedule, Schedules: 1}
	defer func() {
		if v := recover(); v != nil {
			r.Violation = panicked(v)
		}
	}()
	var p replayer[M]
	m, bad := p.run(start(), schedule, &r.Trace, nil)
	if bad != nil {
		r.Violation = bad
		return r
	}
	if m.Violation() == nil {
		m.AppendState(p.buf[:0])
		if len(m.Choices()) == 0 {
			m.CheckEnd()
		}
	}
	r.Violation = m.Violation()
	return r
}

// replayer takes the steps of a schedule as the search takes them.
type replayer[M Model[M]] struct {
	buf   []byte
	steps int // taken so far, to number a step that does not exist
}

// run takes schedule's steps from m as a search takes them (each state
// encoded, each step on a copy), so that a panic the search met is met
// again, appending each step to trace; visit, when set, sees each state
// and its choices before the step at pos is taken from it. It stops before
// a step when the model reports a violation, and at a choice that does not
// exist, with a replay violation.
func (p *replayer[M]) run(m M, schedule []int, trace *[]string, visit func(m M, choices []int, pos int)) (M, *Violation) {
	for _, pos := range schedule {
		if m.Violation() != nil {
			break
		}
		p.buf = m.AppendState(p.buf[:0])
		choices := m.Choices()
		if pos < 0 || pos >= len(choices) {
			return m, &Violation{Invariant: "replay", Detail: fmt.Sprintf("step %d: choice %d of %d does not exist (model changed?)", p.steps+1, pos, len(choices))}
		}
		if visit != nil {
			visit(m, choices, pos)
		}
		*trace = append(*trace, m.Describe(choices[pos]))
		p.steps++
		n := m.Clone()
		n.Step(choices[pos])
		m = n
	}
	return m, nil
}

// confirm replays schedule, on which a search met a failure, met (nil
// when the model's Violation reported it): the replay's verdict is the
// one reported. A failure the replay does not meet is a failure still: a
// panic in a call replay does not make (a Commuter's, a Hotter's,
// Recycle) as it was met; any other, as the model's failing to be a
// function of its schedule. replays reports whether the replay met the
// failure.
func confirm[M Model[M]](start func() M, schedule []int, met *Violation) (res Result, replays bool) {
	res = Replay(start, schedule)
	if res.Violation != nil {
		return res, true
	}
	if met != nil && met.Invariant == PanicInvariant {
		res.Violation = met
		return res, false
	}
	res.Violation = &Violation{Invariant: "replay", Detail: fmt.Sprintf(
		"a violation was found on schedule %s but its replay does not meet it: the model is not a function of its schedule (a step reads state outside the model, or a cache went stale)",
		formatSchedule(schedule))}
	return res, false
}
