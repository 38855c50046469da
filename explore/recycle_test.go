package explore

import (
	"fmt"
	"testing"
)

// reused is the rounds model made a Recycler that takes its next copies
// from what the search recycled, and that notes every use of a copy after
// it was recycled: the search must never touch one again, or a reused
// copy would be two states at once.
type reused struct {
	*rounds
	gone  bool
	clock *recycling
}

type recycling struct {
	clones, recycled, misuses int
	spare                     []*reused
}

func (r *reused) use() {
	if r.gone {
		r.clock.misuses++
	}
}

func (r *reused) Choices() []int              { r.use(); return r.rounds.Choices() }
func (r *reused) Step(c int)                  { r.use(); r.rounds.Step(c) }
func (r *reused) AppendState(b []byte) []byte { r.use(); return r.rounds.AppendState(b) }
func (r *reused) Event(c int) (Event, bool)   { r.use(); return r.rounds.Event(c) }
func (r *reused) Footprint() *Footprint       { r.use(); return r.rounds.Footprint() }

func (r *reused) Clone() *reused {
	r.use()
	r.clock.clones++
	var n *reused
	if k := len(r.clock.spare); k > 0 {
		n, r.clock.spare = r.clock.spare[k-1], r.clock.spare[:k-1]
		// Reused memory: the old copy's slices are overwritten, as a
		// model that recycles would.
		copy(n.rounds.pc, r.pc)
		copy(n.rounds.x, r.x)
		n.rounds.progs, n.rounds.fp = r.progs, r.fp
		n.gone = false
		return n
	}
	return &reused{rounds: r.rounds.Clone(), clock: r.clock}
}

func (r *reused) Recycle() {
	if r.gone {
		r.clock.misuses++ // recycled twice
	}
	r.gone = true
	r.clock.recycled++
	r.clock.spare = append(r.clock.spare, r)
}

// TestRecycledCopiesAreNeverTouched: the search recycles each copy it made
// exactly once, never reads or steps one after, and a model that reuses
// the memory enters the same states as one that does not, with and
// without sleep sets, on one worker and on three.
func TestRecycledCopiesAreNeverTouched(t *testing.T) {
	progs := [][]op{{{1, 2, 1}, {0, 0, 1}, {0, 1, 1}}, {{0, 1, 1}, {2, 1, 0}}, {{0, 1, 2}, {1, 0, 1}}}
	plain := Explore(func() *rounds { return &rounds{progs: progs, pc: make([]int, 3), x: make([]int, 3)} },
		Options{Workers: 1, NoSleepSets: true})
	for _, workers := range []int{1, 3} {
		for _, noSleep := range []bool{true, false} {
			t.Run(fmt.Sprintf("workers=%d,sleep=%v", workers, !noSleep), func(t *testing.T) {
				var clocks []*recycling // one per worker: each starts its own line of copies
				start := func() *reused {
					c := &recycling{}
					clocks = append(clocks, c)
					return &reused{rounds: &rounds{progs: progs, pc: make([]int, 3), x: make([]int, 3)}, clock: c}
				}
				r := Explore(start, Options{Workers: workers, NoSleepSets: noSleep})
				if r.States != plain.States || !r.Complete() {
					t.Fatalf("%d states, want %d (truncated %q)", r.States, plain.States, r.Truncated)
				}
				for i, c := range clocks {
					if c.misuses != 0 {
						t.Errorf("line %d: %d uses of a recycled copy", i, c.misuses)
					}
					if c.recycled != c.clones {
						t.Errorf("line %d: %d copies made, %d recycled", i, c.clones, c.recycled)
					}
				}
			})
		}
	}
}
