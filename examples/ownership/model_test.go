package main

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/rrefkit/rref/explore"
	"github.com/rrefkit/rref/protocol"
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

// TestBorrowersAreNotInterchangeable: each borrower of the chain names its
// successor, and the owner lends to the first, so no renaming of them maps
// the world onto itself: the world refuses to treat them as a symmetric
// group, saying which node tells them apart, rather than merge states
// that differ.
func TestBorrowersAreNotInterchangeable(t *testing.T) {
	cfg := worldConfig(3, false)
	cfg.Symmetric = [][]protocol.NodeID{{borrowerName(0), borrowerName(1), borrowerName(2)}}
	_, err := world.Start(cfg)
	if !errors.Is(err, explore.ErrRefused) || !strings.Contains(fmt.Sprint(err), "node owner starts as") {
		t.Fatalf("%v, want a refusal naming the owner", err)
	}
	t.Log(err)
	cfg.Symmetric = [][]protocol.NodeID{{borrowerName(1), borrowerName(2)}}
	if _, err = world.Start(cfg); !errors.Is(err, explore.ErrRefused) || !strings.Contains(fmt.Sprint(err), "node b1 starts as") {
		t.Fatalf("%v, want a refusal naming b1", err)
	}
	t.Log(err)
}
