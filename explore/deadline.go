package explore

import (
	"fmt"
	"sync"
	"time"
)

// A search checks its time bound between steps, so a step that never
// returns (a model blocked on a lock or a channel, or looping) would keep
// it from ever looking. Under a time bound the search therefore runs on
// goroutines of its own, watched from the caller's: when the bound and
// stuckGrace have passed and the search has not returned, Explore returns
// an incomplete result that names the step that did not return, and
// leaves the stuck goroutine behind (Go cannot end one from outside).

// stuckGrace is how long past its time bound a search may take to unwind
// before it counts as stuck: the workers notice the bound at their next
// state, within microseconds, and the search for the shortest failing
// schedule stops at the bound too; a second is far beyond both on a
// loaded machine, and short beside any bound worth setting.
const stuckGrace = time.Second

// stepLog is the schedule one goroutine of a search is taking, the step in
// progress last, kept where the watchdog can read it: the goroutine takes
// the lock to push or pop a step (uncontended, a few nanoseconds against
// the microseconds of a step), the watchdog to copy the schedule.
type stepLog struct {
	mu   sync.Mutex
	path []int
	// finished is set when the goroutine is done with the model.
	finished bool
	// what names the goroutine's part in the search, for the report.
	what string
}

func (l *stepLog) push(pos int) {
	l.mu.Lock()
	l.path = append(l.path, pos)
	l.mu.Unlock()
}

func (l *stepLog) pop() {
	l.mu.Lock()
	l.path = l.path[:len(l.path)-1]
	l.mu.Unlock()
}

// reset starts a new schedule (a walk's).
func (l *stepLog) reset() {
	l.mu.Lock()
	l.path = l.path[:0]
	l.mu.Unlock()
}

func (l *stepLog) finish() {
	l.mu.Lock()
	l.finished = true
	l.mu.Unlock()
}

// snapshot is a copy of the schedule in progress, and whether the
// goroutine is done.
func (l *stepLog) snapshot() ([]int, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]int(nil), l.path...), l.finished
}

// watch holds the step logs of one search's goroutines.
type watch struct {
	mu   sync.Mutex
	logs []*stepLog
}

// log registers a new goroutine's log; a nil watch (no time bound) still
// gives one, which nobody reads.
func (w *watch) log(what string) *stepLog {
	l := &stepLog{what: what}
	if w == nil {
		return l
	}
	w.mu.Lock()
	w.logs = append(w.logs, l)
	w.mu.Unlock()
	return l
}

// watched runs search on a goroutine of its own and returns its result, or,
// when it has not returned stuckGrace after the time bound, an incomplete
// result that says which step did not return.
func watched[M Model[M]](start func() M, opt Options, began time.Time, search func(*watch) Result) Result {
	w := &watch{}
	done := make(chan Result, 1)
	go func() {
		var r Result
		defer func() {
			if v := recover(); v != nil {
				r = Result{Violation: panicked(v)}
			}
			done <- r
		}()
		r = search(w)
	}()
	wait := time.NewTimer(max(opt.Timeout-time.Since(began), 0) + stuckGrace)
	defer wait.Stop()
	select {
	case r := <-done:
		return r
	case <-wait.C:
	}
	return Result{Truncated: stuckReport(w, start, opt.Timeout)}
}

// stuck describes what keeps the search from returning: the step each
// goroutine still in the model is taking, named by its schedule and, when
// a replay of the steps before it returns in time, by the model.
func stuckReport[M Model[M]](w *watch, start func() M, bound time.Duration) string {
	w.mu.Lock()
	logs := append([]*stepLog(nil), w.logs...)
	w.mu.Unlock()
	for _, l := range logs {
		path, finished := l.snapshot()
		if finished {
			continue
		}
		if len(path) == 0 {
			return fmt.Sprintf("time bound %v reached, and the model's code did not return within %v of it: %s is stuck in the start state (its Choices, AppendState, Violation or CheckEnd)",
				bound, stuckGrace, l.what)
		}
		step := describeStep(start, path)
		return fmt.Sprintf("time bound %v reached, and the model's code did not return within %v of it: %s is stuck in step %d%s, on schedule %s (the step last)",
			bound, stuckGrace, l.what, len(path), step, formatSchedule(path))
	}
	return fmt.Sprintf("time bound %v reached, and the search did not return within %v of it, its searchers done: stuck after the search (looking for a shortest failing schedule, or replaying one)",
		bound, stuckGrace)
}

// describeStep names the last step of path as the model describes it, from
// a replay of the steps before it (which returned in the search, and so
// return again in a model that is a function of its schedule), or says
// why it cannot: the replay gets stuck too, or panics.
func describeStep[M Model[M]](start func() M, path []int) string {
	said := make(chan string, 1)
	go func() {
		defer func() {
			if v := recover(); v != nil {
				said <- ""
			}
		}()
		var p replayer[M]
		var trace []string
		m, bad := p.run(start(), path[:len(path)-1], &trace, nil)
		choices := m.Choices()
		last := path[len(path)-1]
		if bad != nil || m.Violation() != nil || last >= len(choices) {
			said <- ""
			return
		}
		said <- ", " + m.Describe(choices[last])
	}()
	wait := time.NewTimer(stuckGrace)
	defer wait.Stop()
	select {
	case s := <-said:
		return s
	case <-wait.C:
		return " (a replay of the steps before it did not return either)"
	}
}
