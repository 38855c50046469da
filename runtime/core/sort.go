package core

import (
	"cmp"
	"slices"
)

// sortedKeys lists m's keys in the order compare gives: maps are walked in
// a fixed order so outputs, state encodings and replays are deterministic.
func sortedKeys[K comparable, V any](m map[K]V, compare func(a, b K) int) []K {
	return appendSortedKeys(make([]K, 0, len(m)), m, compare)
}

// appendSortedKeys is sortedKeys into dst: the state encodings pass an
// array on their stack, as they run for every state an explorer meets.
func appendSortedKeys[K comparable, V any](dst []K, m map[K]V, compare func(a, b K) int) []K {
	for k := range m {
		dst = append(dst, k)
	}
	slices.SortFunc(dst, compare)
	return dst
}

func compareRRefs(a, b RRefID) int {
	return cmp.Or(cmp.Compare(a.Worker, b.Worker), cmp.Compare(a.Local, b.Local))
}

func compareForks(a, b ForkID) int {
	return cmp.Or(cmp.Compare(a.Worker, b.Worker), cmp.Compare(a.Local, b.Local))
}

func sortedU64[V any](m map[uint64]V) []uint64 { return sortedKeys(m, cmp.Compare[uint64]) }
func sortedHandles[V any](m map[HandleID]V) []HandleID {
	return sortedKeys(m, cmp.Compare[HandleID])
}
