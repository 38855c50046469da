package core

import (
	"math"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

// TestBoundedAgainstAModel drives a bounded memory and a plain list of the
// last limit distinct keys added with the same adds, lookups and clones,
// and requires the same answers, with keys of many workers, in any order,
// with local parts at both ends of their range, and keys added again.
func TestBoundedAgainstAModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		limit := rapid.IntRange(1, 40).Draw(t, "limit")
		b := newBounded[ForkID, int](limit)
		var model []ForkID // oldest first, distinct
		vals := map[ForkID]int{}
		key := func(label string) ForkID {
			local := rapid.OneOf(
				rapid.Uint64Range(0, 50),
				rapid.Uint64Range(math.MaxUint64-3, math.MaxUint64),
				rapid.Uint64(),
			).Draw(t, label+" local")
			return ForkID{Worker: WorkerID(rapid.IntRange(0, 130).Draw(t, label+" worker")), Local: local}
		}
		var added []ForkID
		for step := range rapid.IntRange(1, 300).Draw(t, "steps") {
			switch rapid.IntRange(0, 9).Draw(t, "op") {
			case 0, 1, 2, 3:
				k := key("add")
				if rapid.Bool().Draw(t, "again") && len(added) > 0 {
					k = rapid.SampledFrom(added).Draw(t, "old key")
				}
				added = append(added, k)
				b.add(k, step)
				if !slices.Contains(model, k) {
					model = append(model, k)
					vals[k] = step
					if len(model) > limit {
						delete(vals, model[0])
						model = model[1:]
					}
				}
			case 4:
				b = b.clone()
			default:
				k := key("get")
				if rapid.Bool().Draw(t, "known") && len(added) > 0 {
					k = rapid.SampledFrom(added).Draw(t, "known key")
				}
				v, ok := b.get(k)
				want, wantOK := vals[k]
				if ok != wantOK || v != want {
					t.Fatalf("step %d: get(%v) = %d, %v; the last %d keys added say %d, %v", step, k, v, ok, limit, want, wantOK)
				}
			}
		}
	})
}
