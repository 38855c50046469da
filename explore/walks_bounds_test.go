package explore

import "testing"

// A random or PCT walk that runs into MaxDepth makes the result incomplete,
// with the walk's seed. (It once replayed the walk for a trace, found no
// violation in a run cut short, and reported a pass.)
func TestWalkPastTheDepthBoundIsIncomplete(t *testing.T) {
	for _, mode := range []Mode{Random, PCT} {
		start := func() *procs { p := newProcs(1, 1); p.endless = true; return p }
		r := Explore(start, Options{Mode: mode, MaxDepth: 20, Walks: 5})
		t.Logf("%s: passed=%v violation=%v schedules=%v truncated=%q schedule len=%d", mode, r.Passed(), r.Violation, r.Schedules, r.Truncated, len(r.Schedule))
		if r.Truncated == "" || r.Complete() || len(r.Schedule) != 20 {
			t.Errorf("%s: a model that never ends passed %v walks with no violation and no truncation (schedule of %d steps kept)", mode, r.Schedules, len(r.Schedule))
		}
	}
}
