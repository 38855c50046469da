package conformance

import (
	"bytes"
	"math/rand"
	"testing"
)

// TestWorldKeysMatchFreshEncoding: the world caches a digest per core
// (slot.key), per program state and per monitor, dropped when the part may
// change. The clone check runs with fresh set, which recomputes all of them
// and so never reads those caches (review: a cache never dropped passed
// every other test while the search merged distinct states). Random walks
// over the corpus compare, at every state, the key the search uses (caches
// read) with the key computed afresh on a clone.
func TestWorldKeysMatchFreshEncoding(t *testing.T) {
	scs, err := Corpus()
	if err != nil {
		t.Fatal(err)
	}
	for _, sc := range scs {
		for seed := range int64(20) {
			rng := rand.New(rand.NewSource(seed))
			w := newWorld(sc, nil, false)
			for step := 0; step < 400; step++ {
				cached := w.AppendState(nil)
				f := w.Clone()
				f.fresh = true
				fresh := f.AppendState(nil)
				if !bytes.Equal(cached, fresh) {
					t.Fatalf("%s seed %d step %d: the cached state key differs from the fresh one", sc.Name, seed, step)
				}
				cs := w.Choices()
				if len(cs) == 0 || w.Violation() != nil {
					break
				}
				// Step a clone, as the search does, and go on from it.
				n := w.Clone()
				n.Step(cs[rng.Intn(len(cs))])
				w = n
			}
		}
	}
}

// TestSteppingTheOriginalLeavesItsClone: the search steps a state itself
// for its last choice, after cloning it for the others, so a world stepped
// after a Clone must write nothing its clone reads. Random walks step the
// original and check the clone still encodes as it did.
func TestSteppingTheOriginalLeavesItsClone(t *testing.T) {
	scs, err := Corpus()
	if err != nil {
		t.Fatal(err)
	}
	for _, sc := range scs {
		for seed := range int64(5) {
			rng := rand.New(rand.NewSource(seed))
			w := newWorld(sc, nil, false)
			for step := 0; step < 400; step++ {
				cs := w.Choices()
				if len(cs) == 0 || w.Violation() != nil {
					break
				}
				c := w.Clone()
				f := c.Clone()
				f.fresh = true
				before := f.AppendState(nil)
				w.Step(cs[rng.Intn(len(cs))])
				f = c.Clone()
				f.fresh = true
				if after := f.AppendState(nil); !bytes.Equal(before, after) {
					t.Fatalf("%s seed %d step %d: stepping a world changed its clone", sc.Name, seed, step)
				}
			}
		}
	}
}
