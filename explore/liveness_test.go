package explore_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/rrefkit/rref/explore"
)

// resender is a client that asks a server for something and waits, in a
// hot state, for the answer; its timer, when it has one, makes it resend
// the request each time it expires. The network holds at most one copy of
// each message (a resend of a request in flight changes nothing).
type resender struct {
	timer bool // the client resends on a timer while it waits
	lossy bool // the network may lose the request
	again bool // once answered, the client asks again, forever

	client  int  // idle, waiting or done
	request bool // in flight
	answer  bool // in flight
	expired bool // the timer expired: the client is to resend
	failed  *explore.Violation
}

const (
	idle = iota
	waiting
	done
)

// The choices, each one agent's step.
const (
	ask    = iota // client: sends its request
	take          // client: takes the answer
	reply         // server: answers the request in flight
	expire        // timer
	resend        // timer: the client resends and sets it again
	lose          // network: loses the request
)

func (r *resender) Choices() []int {
	var out []int
	add := func(c int, enabled bool) {
		if enabled {
			out = append(out, c)
		}
	}
	add(ask, r.client == idle)
	add(take, r.client == waiting && r.answer)
	add(reply, r.request)
	add(expire, r.timer && r.client == waiting && !r.expired)
	add(resend, r.timer && r.client == waiting && r.expired)
	add(lose, r.lossy && r.request)
	return out
}

func (r *resender) Step(c int) {
	switch c {
	case ask:
		r.client, r.request = waiting, true
	case take:
		r.client, r.answer, r.expired = done, false, false
		if r.again {
			r.client = idle
		}
	case reply:
		r.request, r.answer = false, true
	case expire:
		r.expired = true
	case resend:
		r.request, r.expired = true, false
	case lose:
		r.request = false
	}
}

func (r *resender) Clone() *resender { n := *r; return &n }
func (r *resender) AppendState(b []byte) []byte {
	return fmt.Appendf(b, "%d %v %v %v", r.client, r.request, r.answer, r.expired)
}
func (r *resender) Violation() *explore.Violation { return r.failed }
func (r *resender) CheckEnd() {
	if r.client != done {
		r.failed = &explore.Violation{Invariant: "answered", Detail: "the run ended with the client unanswered"}
	}
}
func (r *resender) Describe(c int) string {
	return []string{"the client asks", "the client takes the answer", "the server answers",
		"the timer expires", "the client resends its request", "the network loses the request"}[c]
}
func (r *resender) ChoiceKey(c int) string { return fmt.Sprint(c) }

// Hot implements explore.Hotter.
func (r *resender) Hot() string {
	if r.client == waiting {
		return "the client waits for an answer"
	}
	return ""
}

// agents is the resender with its agents named (explore.Agents); the
// resender alone leaves weak fairness to be judged per event.
type agents struct{ *resender }

func (a agents) Clone() agents { return agents{a.resender.Clone()} }
func (a agents) Agent(c int) string {
	return []string{"client", "client", "server", "timer", "timer", "network"}[c]
}

func livelock() agents { return agents{&resender{timer: true}} }
func lossy() agents    { return agents{&resender{timer: true, lossy: true}} }
func forever() agents  { return agents{&resender{again: true}} }

// The client that resends forever while the server could answer: today's
// search passed it (Passed, Cyclic); with Liveness it is a violation,
// reported as a lasso that replays: the client asks, then the timer
// expires and it resends, round and round, waiting all along.
func TestLivelockIsALasso(t *testing.T) {
	plain := explore.Explore(livelock, explore.Options{})
	if !plain.Passed() || !plain.Cyclic {
		t.Fatalf("without liveness: passed %v cyclic %v, want a pass over a cyclic graph", plain.Passed(), plain.Cyclic)
	}
	r := explore.Explore(livelock, explore.Options{Liveness: true})
	t.Logf("%v\nprefix %v %q\ncycle %v %q", r.Violation, r.Schedule, r.Trace, r.Cycle, r.CycleTrace)
	if r.Violation == nil || r.Violation.Invariant != explore.LivenessInvariant {
		t.Fatalf("violation %v, want %s", r.Violation, explore.LivenessInvariant)
	}
	wantPrefix := []string{"the client asks"}
	wantCycle := []string{"the timer expires", "the client resends its request"}
	if !slices.Equal(r.Trace, wantPrefix) || !slices.Equal(r.CycleTrace, wantCycle) {
		t.Errorf("lasso %q then %q, want %q then %q", r.Trace, r.CycleTrace, wantPrefix, wantCycle)
	}
	if !r.Shortest || !r.Complete() {
		t.Errorf("shortest %v (%s), complete %v: the search was whole", r.Shortest, r.NotShortest, r.Complete())
	}
	again := explore.ReplayLasso(livelock, r.Schedule, r.Cycle, false)
	if again.Violation == nil || again.Violation.Invariant != explore.LivenessInvariant || !slices.Equal(again.CycleTrace, r.CycleTrace) {
		t.Errorf("the lasso's replay: %v, cycle %q", again.Violation, again.CycleTrace)
	}
}

// Under weak fairness the same model passes: on every hot cycle the server
// (or, once it answered, the client's taking the answer) is enabled in
// every state and never taken, which a fair scheduler does not do.
func TestWeakFairnessRulesTheLivelockOut(t *testing.T) {
	r := explore.Explore(livelock, explore.Options{WeakFairness: true})
	if !r.Passed() || !r.Complete() || !r.Cyclic {
		t.Fatalf("passed %v (%v), complete %v (%s), cyclic %v: want a complete pass over a cyclic graph",
			r.Passed(), r.Violation, r.Complete(), r.Truncated, r.Cyclic)
	}
	// And the cycle found without fairness does not replay as a fair one.
	unfair := explore.Explore(livelock, explore.Options{Liveness: true})
	if v := explore.ReplayLasso(livelock, unfair.Schedule, unfair.Cycle, true).Violation; v != nil {
		t.Errorf("the unfair cycle replayed under weak fairness as %v", v)
	}
}

// A hot cycle a fair scheduler may keep to is reported under fairness too:
// when the network loses the request and the client resends it, the server
// is enabled only while the request is in flight, not throughout, and
// every agent enabled throughout (the timer) takes its steps.
func TestFairHotCycleIsReported(t *testing.T) {
	for _, fair := range []bool{false, true} {
		r := explore.Explore(lossy, explore.Options{Liveness: true, WeakFairness: fair})
		t.Logf("weak fairness %v: %v\nprefix %q\ncycle %q", fair, r.Violation, r.Trace, r.CycleTrace)
		if r.Violation == nil || r.Violation.Invariant != explore.LivenessInvariant {
			t.Fatalf("weak fairness %v: violation %v, want %s", fair, r.Violation, explore.LivenessInvariant)
		}
		want := []string{"the timer expires", "the client resends its request"} // the shortest cycle
		if fair {
			// The server's answer is enabled where the cycle enters: the
			// cycle must pass through a state where it is not.
			want = []string{"the network loses the request", "the timer expires", "the client resends its request"}
		}
		if !slices.Equal(r.CycleTrace, want) || !slices.Equal(r.Trace, []string{"the client asks"}) {
			t.Errorf("weak fairness %v: lasso %q then %q, want %q then %q", fair, r.Trace, r.CycleTrace, []string{"the client asks"}, want)
		}
		if v := explore.ReplayLasso(lossy, r.Schedule, r.Cycle, fair).Violation; v == nil || v.Invariant != explore.LivenessInvariant {
			t.Errorf("weak fairness %v: the lasso's replay: %v", fair, v)
		}
	}
}

// A cycle through a state that is not hot is no violation: the client that
// asks again and again is answered each time round.
func TestCycleThroughColdStatesPasses(t *testing.T) {
	for _, fair := range []bool{false, true} {
		r := explore.Explore(forever, explore.Options{Liveness: true, WeakFairness: fair})
		if !r.Passed() || !r.Complete() || !r.Cyclic {
			t.Errorf("weak fairness %v: passed %v (%v), complete %v (%s), cyclic %v", fair, r.Passed(), r.Violation, r.Complete(), r.Truncated, r.Cyclic)
		}
	}
	// Its loop replays back to where it began, but through idle, which is not hot.
	r := explore.ReplayLasso(forever, nil, []int{0, 0, 0}, false)
	want := []string{"the client asks", "the server answers", "the client takes the answer"}
	if r.Violation != nil || !slices.Equal(r.CycleTrace, want) {
		t.Errorf("the loop through idle: %v after %q, want no violation after %q", r.Violation, r.CycleTrace, want)
	}
}

// ReplayLasso reports a liveness violation only for a cycle that returns
// to the state it started from, and a step that does not exist as Replay does.
func TestReplayLassoChecksTheCycle(t *testing.T) {
	if v := explore.ReplayLasso(livelock, []int{0}, []int{1}, false).Violation; v != nil {
		t.Errorf("half a cycle (the timer expires, and the state differs): %v", v)
	}
	if v := explore.ReplayLasso(livelock, []int{0}, nil, false).Violation; v != nil {
		t.Errorf("no cycle at all: %v", v)
	}
	if v := explore.ReplayLasso(livelock, []int{0}, []int{1, 7}, false).Violation; v == nil || v.Invariant != "replay" {
		t.Errorf("a choice that does not exist: %v, want a replay violation", v)
	}
}

// Without Agents, weak fairness is per event: the server's answer is one,
// and the verdicts are the same here.
func TestWeakFairnessPerEvent(t *testing.T) {
	if r := explore.Explore(func() *resender { return livelock().resender }, explore.Options{WeakFairness: true}); !r.Passed() || !r.Complete() {
		t.Errorf("the livelock per event: %v (%s)", r.Violation, r.Truncated)
	}
	if r := explore.Explore(func() *resender { return lossy().resender }, explore.Options{WeakFairness: true}); r.Violation == nil || r.Violation.Invariant != explore.LivenessInvariant {
		t.Errorf("the lossy network per event: %v, want %s", r.Violation, explore.LivenessInvariant)
	}
}

// The lasso does not depend on how many workers search, nor on the order
// each takes the steps in.
func TestLassoDoesNotDependOnWorkers(t *testing.T) {
	for _, fair := range []bool{false, true} {
		one := explore.Explore(lossy, explore.Options{WeakFairness: fair, Liveness: true, Workers: 1})
		for i := range 20 {
			r := explore.Explore(lossy, explore.Options{WeakFairness: fair, Liveness: true, Workers: 3})
			if !slices.Equal(r.Schedule, one.Schedule) || !slices.Equal(r.Cycle, one.Cycle) {
				t.Fatalf("weak fairness %v, run %d: 3 workers found %v then %v, 1 worker %v then %v", fair, i, r.Schedule, r.Cycle, one.Schedule, one.Cycle)
			}
		}
	}
}

// Liveness asked of a search that cannot check it leaves the result
// incomplete, saying why, rather than passing in silence.
func TestLivenessUncheckedIsIncomplete(t *testing.T) {
	r := explore.Explore(func() *counters { return &counters{} }, explore.Options{Liveness: true})
	if r.Passed() {
		t.Fatalf("the lost update passed")
	}
	noHot := explore.Explore(func() *tallies { return &tallies{} }, explore.Options{Liveness: true})
	walks := explore.Explore(livelock, explore.Options{Liveness: true, Mode: explore.Random, Walks: 10})
	for _, r := range []explore.Result{noHot, walks} {
		if r.Complete() || !r.Passed() {
			t.Errorf("%s: complete %v (%q), passed %v: want incomplete", r.Mode, r.Complete(), r.Truncated, r.Passed())
		}
	}
}

// A livelock reported as a lasso: the schedule into the cycle, then the
// cycle the run can go round forever.
func Example_liveness() {
	start := func() agents { return agents{&resender{timer: true}} }
	r := explore.Explore(start, explore.Options{Liveness: true})
	fmt.Println(r.Violation)
	for i, step := range r.Trace {
		fmt.Printf("%d  %s\n", i+1, step)
	}
	fmt.Println("then forever:")
	for i, step := range r.CycleTrace {
		fmt.Printf("%d  %s\n", len(r.Trace)+i+1, step)
	}
	fair := explore.Explore(start, explore.Options{WeakFairness: true})
	fmt.Println("under weak fairness, passed:", fair.Passed())
	// Output:
	// liveness: the run can go round a cycle of 2 steps forever, every state on it hot (where it enters: the client waits for an answer)
	// 1  the client asks
	// then forever:
	// 2  the timer expires
	// 3  the client resends its request
	// under weak fairness, passed: true
}
