package explore

import (
	"strings"
	"testing"
	"time"
)

// stuckGrid is a grid whose step into (px, py) does not return until
// release is closed: a model blocked on a lock or a channel.
type stuckGrid struct {
	grid
	release <-chan struct{}
}

func (g *stuckGrid) Step(c int) {
	g.grid.Step(c)
	if g.at() {
		<-g.release
	}
}

func (g *stuckGrid) Clone() *stuckGrid {
	n := *g
	return &n
}

// stuckGuard bounds how long the test waits for Explore to return: far
// past the time bound and stuckGrace, so that only a search that ignores
// its bound reaches it. It fails the test; it measures nothing.
const stuckGuard = time.Minute

// TestTimeoutHoldsWhenAStepBlocks: a search under a time bound returns
// even when one step never does, with an incomplete result that names the
// stuck step and the schedule to it, in the exhaustive mode on one or two
// searchers and in the walks. It used to wait for the step forever.
func TestTimeoutHoldsWhenAStepBlocks(t *testing.T) {
	for _, opt := range []Options{
		{Workers: 1},
		{Workers: 2},
		{Mode: Random, Walks: 100},
		{Mode: PCT, Walks: 100},
	} {
		release := make(chan struct{})
		start := func() *stuckGrid { return &stuckGrid{grid: grid{n: 3, px: 2, py: 1}, release: release} }
		opt.Timeout = 50 * time.Millisecond
		done := make(chan Result, 1)
		go func() { done <- Explore(start, opt) }()
		var r Result
		select {
		case r = <-done:
		case <-time.After(stuckGuard):
			close(release)
			t.Fatalf("%+v: the search did not return within %v of its bound", opt, stuckGuard)
		}
		t.Logf("%s: %s", opt.Mode, r.Truncated)
		close(release) // the stuck step returns, and its goroutine ends (goleak)
		if r.Violation != nil || r.Complete() {
			t.Fatalf("%+v: want an incomplete result, got violation %v, truncated %q", opt, r.Violation, r.Truncated)
		}
		// The step into (2, 1) is the third, an x++ or a y++ after two.
		for _, want := range []string{"time bound 50ms reached", "did not return", "stuck in step 3", "(the step last)"} {
			if !strings.Contains(r.Truncated, want) {
				t.Errorf("%+v: %q does not say %q", opt, r.Truncated, want)
			}
		}
		if !strings.Contains(r.Truncated, ", x++, on schedule") && !strings.Contains(r.Truncated, ", y++, on schedule") {
			t.Errorf("%+v: %q does not describe the stuck step", opt, r.Truncated)
		}
		// Its schedule replays to the stuck state: a stuck model is
		// debugged by replaying the steps before the one that blocks.
		i := strings.Index(r.Truncated, "on schedule ")
		schedule, err := ParseSchedule(strings.Fields(r.Truncated[i+len("on schedule "):])[0])
		if err != nil || len(schedule) != 3 {
			t.Fatalf("%+v: schedule in %q: %v %v", opt, r.Truncated, schedule, err)
		}
		var p replayer[*grid]
		var trace []string
		g, _ := p.run(&grid{n: 3, px: 2, py: 1}, schedule, &trace, nil)
		if !g.at() {
			t.Errorf("%+v: schedule %v leads to (%d, %d), not to the stuck step", opt, schedule, g.x, g.y)
		}
	}
}

// TestTimeoutWithoutAStuckStep: a search that finishes within its bound
// reports as it did without the watchdog, and one the bound stops
// normally says only that.
func TestTimeoutWithoutAStuckStep(t *testing.T) {
	start := func() *grid { return &grid{n: 20, failY: 5} }
	r := Explore(start, Options{Timeout: time.Hour})
	if r.Passed() || !r.Shortest || len(r.Schedule) != 5 {
		t.Fatalf("got %v on %v (shortest %v)", r.Violation, r.Schedule, r.Shortest)
	}
	passes := func() *grid { return &grid{n: 30} }
	r = Explore(passes, Options{Timeout: time.Hour})
	if !r.Passed() || !r.Complete() || r.States != 31*31 {
		t.Fatalf("got %v, %q, %d states", r.Violation, r.Truncated, r.States)
	}
}
