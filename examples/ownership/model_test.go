package main

import (
	"testing"

	"github.com/rrefkit/rref/explore"
	"github.com/rrefkit/rref/protocol/world"
)

func explored(t *testing.T, cfg world.Config) (explore.Result, func() *world.World) {
	t.Helper()
	start, err := world.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r := explore.Explore(start, explore.Options{})
	if r.Truncated != "" {
		t.Fatalf("incomplete: %s", r.Truncated)
	}
	return r, start
}

// TestBorrowersKeepTheValue: in every order, a chain of borrowers that
// tell the owner before passing keeps the value alive while any holds it,
// and the owner frees it in the end.
func TestBorrowersKeepTheValue(t *testing.T) {
	for _, n := range []int{2, 3} {
		cfg := worldConfig(n, false)
		cfg.AtEnd = []world.Check{{Name: "freed", Check: freedAtEnd}}
		r, _ := explored(t, cfg)
		if !r.Passed() {
			t.Fatalf("%d borrowers: %v\n%v", n, r.Violation, r.Trace)
		}
		t.Logf("%d borrowers: %d states", n, r.States)
	}
}

// TestPassingSilently: a borrower that passes its reference on without
// telling the owner lets the owner free a value the next one holds; the
// shortest schedule replays.
func TestPassingSilently(t *testing.T) {
	r, start := explored(t, worldConfig(2, true))
	if r.Passed() || r.Violation.Invariant != "NoUseAfterFree" || !r.Shortest {
		t.Fatalf("got %v (shortest %v)", r.Violation, r.Shortest)
	}
	for i, s := range r.Trace {
		t.Logf("%2d %s", i+1, s)
	}
	if again := explore.Replay(start, r.Schedule); again.Violation == nil || again.Violation.Error() != r.Violation.Error() {
		t.Fatalf("replay: %v, want %v", again.Violation, r.Violation)
	}
}
