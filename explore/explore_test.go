package explore

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// procs is a toy model: independent processes, each counting up to its
// limit one step at a time. With bad set, reaching it is a violation; with
// endless, the first process never stops (a state space with no end).
type procs struct {
	at      []int
	limit   int
	bad     []int // a state that breaks the invariant, or nil
	endless bool
	failed  *Violation
	checked *int // counts CheckEnd calls, shared by clones
}

func newProcs(n, limit int) *procs {
	return &procs{at: make([]int, n), limit: limit, checked: new(int)}
}

func (p *procs) Choices() []int {
	var out []int
	for i, a := range p.at {
		if a < p.limit || p.endless && i == 0 {
			out = append(out, i)
		}
	}
	return out
}

func (p *procs) Step(c int) {
	p.at[c]++
	if p.bad != nil && slices.Equal(p.at, p.bad) {
		p.failed = &Violation{Invariant: "bad", Detail: fmt.Sprint(p.at)}
	}
}

func (p *procs) Clone() *procs {
	n := *p
	n.at = slices.Clone(p.at)
	return &n
}

func (p *procs) AppendState(b []byte) []byte {
	for _, a := range p.at {
		b = fmt.Appendf(b, "%d,", a)
	}
	return b
}

func (p *procs) Violation() *Violation  { return p.failed }
func (p *procs) CheckEnd()              { *p.checked++ }
func (p *procs) Describe(c int) string  { return fmt.Sprintf("p%d steps", c) }
func (p *procs) ChoiceKey(c int) string { return fmt.Sprint(c) }

// TestCountsAreExact: three processes of three steps each interleave in
// 9!/(3!3!3!) = 1680 ways through 4³ = 64 states, on any number of workers.
func TestCountsAreExact(t *testing.T) {
	for _, workers := range []int{0, 1, 2, 4, -1} {
		r := Explore(func() *procs { return newProcs(3, 3) }, Options{Workers: workers})
		if !r.Passed() || r.Truncated != "" || r.States != 64 || r.Schedules != 1680 {
			t.Errorf("workers %d: %+v", workers, r)
		}
	}
}

// TestShortestFailingSchedule: the violation at (2,2,0) is reached in four
// steps at best; the trace replays to it.
func TestShortestFailingSchedule(t *testing.T) {
	start := func() *procs { p := newProcs(3, 3); p.bad = []int{2, 2, 0}; return p }
	for _, workers := range []int{1, 2} {
		r := Explore(start, Options{Workers: workers})
		if r.Passed() || r.Violation.Invariant != "bad" || len(r.Schedule) != 4 || len(r.Trace) != 4 {
			t.Fatalf("workers %d: %v %v", workers, r.Violation, r.Trace)
		}
		again := Replay(start, r.Schedule)
		if again.Violation == nil || again.Violation.Error() != r.Violation.Error() {
			t.Fatalf("replay %v: %v", r.Schedule, again.Violation)
		}
	}
}

// TestViolationOnEdgeIntoSeenState: the violation is on one edge into a
// state that another edge reaches cleanly (the state's encoding does not
// hold the violation); the search must not lose it to the state's
// de-duplication.
func TestViolationOnEdgeIntoSeenState(t *testing.T) {
	for _, workers := range []int{1, 2} {
		r := Explore(func() *edgy { return &edgy{} }, Options{Workers: workers})
		if r.Passed() || r.Violation.Invariant != "edge" || !slices.Equal(r.Schedule, []int{1}) {
			t.Fatalf("got %v %v", r.Violation, r.Schedule)
		}
	}
}

// edgy: from the start, choice 0 and choice 1 reach the same state; only
// choice 1 is a violation.
type edgy struct {
	done   bool
	failed *Violation
}

func (e *edgy) Choices() []int {
	if e.done {
		return nil
	}
	return []int{0, 1}
}
func (e *edgy) Step(c int) {
	e.done = true
	if c == 1 {
		e.failed = &Violation{Invariant: "edge"}
	}
}
func (e *edgy) Clone() *edgy                { n := *e; return &n }
func (e *edgy) AppendState(b []byte) []byte { return fmt.Appendf(b, "%v", e.done) }
func (e *edgy) Violation() *Violation       { return e.failed }
func (e *edgy) CheckEnd()                   {}
func (e *edgy) Describe(c int) string       { return fmt.Sprint(c) }
func (e *edgy) ChoiceKey(c int) string      { return fmt.Sprint(c) }

// TestCyclesAreExploredOnce: a model whose state graph has a cycle (a
// process that counts modulo 3) is explored to the end: every state once,
// the cycle's back edges not followed, and the result says the schedule
// count leaves out the schedules that go round it.
func TestCyclesAreExploredOnce(t *testing.T) {
	r := Explore(func() *ring { return &ring{} }, Options{})
	if !r.Passed() || r.Truncated != "" || r.States != 5 || !r.Cyclic {
		t.Fatalf("%+v", r)
	}
	bad := Explore(func() *ring { return &ring{bad: 2} }, Options{})
	if bad.Passed() || len(bad.Schedule) != 2 {
		t.Fatalf("%+v", bad)
	}
}

// ring counts modulo 3 and may stop at 0 after having moved.
type ring struct {
	at, bad int
	moved   bool
	stopped bool
	failed  *Violation
}

func (r *ring) Choices() []int {
	if r.stopped {
		return nil
	}
	if r.at == 0 && r.moved {
		return []int{0, 1}
	}
	return []int{0}
}
func (r *ring) Step(c int) {
	if c == 1 {
		r.stopped = true
		return
	}
	r.at, r.moved = (r.at+1)%3, true
	if r.bad != 0 && r.at == r.bad {
		r.failed = &Violation{Invariant: "bad"}
	}
}
func (r *ring) Clone() *ring { n := *r; return &n }
func (r *ring) AppendState(b []byte) []byte {
	if r.stopped {
		return append(b, 's')
	}
	return fmt.Appendf(b, "%d%v", r.at, r.moved)
}
func (r *ring) Violation() *Violation  { return r.failed }
func (r *ring) CheckEnd()              {}
func (r *ring) Describe(c int) string  { return fmt.Sprint(c) }
func (r *ring) ChoiceKey(c int) string { return fmt.Sprint(c) }

// TestBoundsStopAnEndlessSearch: an endless model stops at each bound,
// says which, and reports no verdict as complete.
func TestBoundsStopAnEndlessSearch(t *testing.T) {
	endless := func() *procs { p := newProcs(1, 0); p.endless = true; return p }
	cases := []struct {
		opt  Options
		want string
	}{
		{Options{MaxStates: 500}, "state bound 500"},
		{Options{MaxDepth: 300}, "depth bound 300"},
		{Options{Timeout: 200 * time.Millisecond, MaxDepth: 1 << 30, MaxStates: 1 << 30}, "time bound 200ms"},
		{Options{MaxMemory: 1, MaxDepth: 1 << 30}, "memory bound"},
	}
	for _, tc := range cases {
		for _, workers := range []int{1, 2} {
			tc.opt.Workers = workers
			r := Explore(endless, tc.opt)
			if !strings.Contains(r.Truncated, tc.want) || r.Complete() || !r.Passed() || r.Schedules != 0 {
				t.Errorf("%+v: truncated %q, complete %v, schedules %g", tc.opt, r.Truncated, r.Complete(), r.Schedules)
			}
			if tc.opt.MaxStates > 0 && tc.opt.MaxStates < 1<<30 && r.States > tc.opt.MaxStates {
				t.Errorf("%d states past the bound %d", r.States, tc.opt.MaxStates)
			}
		}
	}
}

// TestWalksReplayFromTheirSeed: a random or PCT failure names its seed and
// schedule, and both replay to the same violation.
func TestWalksReplayFromTheirSeed(t *testing.T) {
	start := func() *procs { p := newProcs(3, 2); p.bad = []int{2, 1, 1}; return p }
	for _, mode := range []Mode{Random, PCT} {
		r := Explore(start, Options{Mode: mode, Seed: 7, Walks: 500})
		if r.Passed() {
			t.Fatalf("%s: found nothing", mode)
		}
		again := Explore(start, Options{Mode: mode, Seed: r.Seed, Walks: 1})
		if again.Passed() || !slices.Equal(again.Schedule, r.Schedule) {
			t.Fatalf("%s: seed %d gave %v, want %v", mode, r.Seed, again.Schedule, r.Schedule)
		}
	}
}

func TestParseSchedule(t *testing.T) {
	got, err := ParseSchedule(" 0, 2,1 ")
	if err != nil || !slices.Equal(got, []int{0, 2, 1}) {
		t.Fatalf("%v %v", got, err)
	}
	for _, bad := range []string{"1,,2", "-1", "x"} {
		if _, err := ParseSchedule(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	r := Result{Schedule: []int{3, 0}}
	if r.ScheduleString() != "3,0" {
		t.Fatal(r.ScheduleString())
	}
}

// TestReplayOfAChangedModel: a schedule that names a choice the model no
// longer offers is an error, not a panic.
func TestReplayOfAChangedModel(t *testing.T) {
	r := Replay(func() *procs { return newProcs(2, 1) }, []int{0, 5})
	if r.Violation == nil || r.Violation.Invariant != "replay" {
		t.Fatalf("got %v", r.Violation)
	}
}
