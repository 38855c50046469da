package core

import "slices"

// deadSet is the peers a core has found dead, sorted. It is never changed
// in place: adding a peer makes a new set, so clones share it freely and
// copying a core copies nothing of it. A core learns of few deaths, and
// asks about one on every message, so a binary search over a short slice
// beats a map, which costs an explorer two allocations a copy.
type deadSet []WorkerID

func (s deadSet) has(w WorkerID) bool {
	_, found := slices.BinarySearch(s, w)
	return found
}

// with is s with w added.
func (s deadSet) with(w WorkerID) deadSet {
	i, found := slices.BinarySearch(s, w)
	if found {
		return s
	}
	return slices.Insert(slices.Clip(s), i, w)
}
