package core

import (
	"maps"
	"slices"
	"testing"

	"github.com/rrefkit/rref/generated/rref"
	"pgregory.net/rapid"
)

// TestForkTableIsAMap drives a fork table and a map with the same sets and
// deletes, ids drawn near zero and near the top of both fields, and checks
// they hold the same forks, the table in id order.
func TestForkTableIsAMap(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		edge := rapid.SampledFrom([]uint64{0, 1, 2, 1<<32 - 1, 1 << 32, ^uint64(0) - 1, ^uint64(0)})
		id := func() ForkID {
			return ForkID{Worker: WorkerID(edge.Draw(t, "worker")), Local: edge.Draw(t, "local")}
		}
		var table forkTable
		model := map[ForkID]forkRec{}
		for range rapid.IntRange(0, 60).Draw(t, "ops") {
			f := id()
			if rapid.Bool().Draw(t, "delete") {
				table.del(f)
				delete(model, f)
				continue
			}
			rec := forkRec{state: rref.ForkState(rapid.IntRange(0, 3).Draw(t, "state")), holder: WorkerID(edge.Draw(t, "holder"))}
			table.set(f, rec)
			model[f] = rec
		}
		if !slices.IsSortedFunc(table, func(a, b forkEntry) int { return compareForks(a.id, b.id) }) {
			t.Fatalf("table out of order: %v", table)
		}
		got := map[ForkID]forkRec{}
		for _, e := range table {
			got[e.id] = e.forkRec
		}
		if !maps.Equal(got, model) {
			t.Fatalf("table %v, want %v", got, model)
		}
		for f, rec := range model {
			if r, ok := table.get(f); !ok || r != rec {
				t.Fatalf("get(%v) = %v, %v; want %v", f, r, ok, rec)
			}
		}
	})
}
