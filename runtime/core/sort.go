package core

import (
	"cmp"
	"slices"
)

func compareIDs(aw WorkerID, al uint64, bw WorkerID, bl uint64) int {
	if c := cmp.Compare(aw, bw); c != 0 {
		return c
	}
	return cmp.Compare(al, bl)
}

func sortedRRefs[V any](m map[RRefID]V) []RRefID {
	out := make([]RRefID, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.SortFunc(out, func(a, b RRefID) int { return compareIDs(a.Worker, a.Local, b.Worker, b.Local) })
	return out
}

func sortedForks[V any](m map[ForkID]V) []ForkID {
	out := make([]ForkID, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.SortFunc(out, func(a, b ForkID) int { return compareIDs(a.Worker, a.Local, b.Worker, b.Local) })
	return out
}

func sortedU64[V any](m map[uint64]V) []uint64 {
	out := make([]uint64, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func sortedHandles[V any](m map[HandleID]V) []HandleID {
	out := make([]HandleID, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
