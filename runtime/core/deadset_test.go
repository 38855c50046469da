package core

import (
	"slices"
	"testing"
)

// TestDeadSetIsNeverChangedInPlace: clones share a dead set, so adding a
// peer must leave every earlier set as it was, whatever its capacity.
func TestDeadSetIsNeverChangedInPlace(t *testing.T) {
	var s deadSet
	var history []deadSet
	for _, w := range []WorkerID{7, 3, 9, 3, 1, ^WorkerID(0), 0} {
		history = append(history, s)
		s = s.with(w)
		if !s.has(w) {
			t.Fatalf("%v lacks %d just added", s, w)
		}
	}
	if !slices.IsSorted(s) || len(s) != 6 {
		t.Fatalf("set %v: want 6 sorted peers", s)
	}
	want := []deadSet{nil, {7}, {3, 7}, {3, 7, 9}, {3, 7, 9}, {1, 3, 7, 9}, {1, 3, 7, 9, ^WorkerID(0)}}
	for i, h := range history {
		if !slices.Equal(h, want[i]) {
			t.Fatalf("set %d changed to %v after later additions, want %v", i, h, want[i])
		}
	}
	if s.has(2) || deadSet(nil).has(0) {
		t.Fatal("a peer never added is reported dead")
	}
}
