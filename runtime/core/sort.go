package core

import (
	"cmp"
	"slices"
)

// sortedKeys lists m's keys in the order compare gives: maps are walked in
// a fixed order so outputs, state encodings and replays are deterministic.
func sortedKeys[K comparable, V any](m map[K]V, compare func(a, b K) int) []K {
	out := make([]K, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.SortFunc(out, compare)
	return out
}

func compareRRefs(a, b RRefID) int {
	return cmp.Or(cmp.Compare(a.Worker, b.Worker), cmp.Compare(a.Local, b.Local))
}

func compareForks(a, b ForkID) int {
	return cmp.Or(cmp.Compare(a.Worker, b.Worker), cmp.Compare(a.Local, b.Local))
}

func sortedRRefs[V any](m map[RRefID]V) []RRefID { return sortedKeys(m, compareRRefs) }
func sortedForks[V any](m map[ForkID]V) []ForkID { return sortedKeys(m, compareForks) }
func sortedU64[V any](m map[uint64]V) []uint64   { return sortedKeys(m, cmp.Compare[uint64]) }
func sortedHandles[V any](m map[HandleID]V) []HandleID {
	return sortedKeys(m, cmp.Compare[HandleID])
}
