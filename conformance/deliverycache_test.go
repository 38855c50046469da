package conformance

import (
	"testing"

	"github.com/rrefkit/rref/explore"
	"github.com/rrefkit/rref/runtime/core"
	"pgregory.net/rapid"
)

// TestDeliveryCacheChangesNothing: the search recycles the copies it is
// done with, and the world remembers what each delivery made, by the
// receiving core's digest and the message's, and replays it
// (world.deliver). A slip in the counts of who holds a core, or a key that
// leaves out anything the core's answer depends on, would hand one state
// another's. Over the corpus and the 2x3 and 3x2 enumerations, on one
// worker, the search with both, and with recycling alone, must take
// exactly the transitions, enter exactly the states and reach exactly the
// verdict of the plain search, with sleep sets and without (where the
// schedules, counted exactly, must agree too).
func TestDeliveryCacheChangesNothing(t *testing.T) {
	scs, err := Corpus()
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range []Bound{{Workers: 2, Commands: 3}, {Workers: 3, Commands: 2}} {
		Enumerate(b, func(sc *Scenario) bool {
			scs = append(scs, sc)
			return true
		})
	}
	scs = sampled(scs)
	hits := 0
	for _, sc := range scs {
		for _, noSleep := range []bool{false, true} {
			// The baseline recycles nothing and caches nothing: a slip in
			// the counts of who holds a core shows against it.
			p := Explore(sc, Options{Workers: 1, NoSleepSets: noSleep, plain: true})
			if p.Truncated != "" {
				t.Fatalf("%s: bound reached: %s", sc.Name, p.Truncated)
			}
			for _, o := range []Options{{Workers: 1, NoSleepSets: noSleep}, {Workers: 1, NoSleepSets: noSleep, noDeliveryCache: true}} {
				c := Explore(sc, o)
				if c.States != p.States || c.Transitions != p.Transitions || c.Schedules != p.Schedules || verdict(c) != verdict(p) {
					t.Errorf("%s (sleep sets %v, cache %v): %d states, %d transitions, %v schedules, %s; plain %d, %d, %v, %s",
						sc.Name, !noSleep, !o.noDeliveryCache, c.States, c.Transitions, c.Schedules, verdict(c), p.States, p.Transitions, p.Schedules, verdict(p))
				}
			}
		}
		// Every delivery taken from the cache is run afresh too, and the
		// two must agree in the core's state and outputs: a key that
		// leaves out a field the core's answer depends on is caught here
		// even where the rest of the world happens to tell the states
		// apart (a user's parent and a waiting run's call id were once
		// missing from the core's encoding).
		var lines []*world
		explore.Explore(func() *world {
			w := newWorld(sc, nil, false)
			w.checkDeliveries = true
			lines = append(lines, w)
			return w
		}, explore.Options{Workers: 1})
		for _, w := range lines {
			hits += w.spare.hits
			if w.spare.mismatch != "" {
				t.Fatalf("%s: %s", sc.Name, w.spare.mismatch)
			}
		}
	}
	if hits == 0 {
		t.Fatal("no delivery was ever taken from the cache")
	}
	t.Logf("%d scenarios, %d deliveries taken from the cache", len(scs), hits)
}

// twoPassesOneHandle is the program that showed the core's encoding
// incomplete: two waiting runs that differ only in the caller's call id
// encoded alike, and the cache answered one with the other's CallRet.
const twoPassesOneHandle = `workers A B C
new B h1 0
new A h2 1
pass B A h1 h3
new A h4 3
pass B A h1 h5
pass A C h3 h6
new A h7 6
release B h1
release A h2
release A h3
release A h4
release A h5
release C h6
release A h7
settle
expect clean
`

// TestRandomProgramsDeliveriesRecheck explores random programs with every
// delivery taken from the cache run afresh as well (world.recheck), the
// program that found the encoding's hole first.
func TestRandomProgramsDeliveriesRecheck(t *testing.T) {
	check := func(t interface{ Fatalf(string, ...any) }, src string) {
		sc, err := Parse("generated.rref", []byte(src))
		if err != nil {
			t.Fatalf("generator wrote a malformed scenario: %v\n%s", err, src)
		}
		var lines []*world
		r := explore.Explore(func() *world {
			w := newWorld(sc, nil, false)
			w.checkDeliveries = true
			lines = append(lines, w)
			return w
		}, explore.Options{Workers: 1, MaxStates: 3000})
		for _, w := range lines {
			if w.spare.mismatch != "" {
				t.Fatalf("%s\n%s", w.spare.mismatch, src)
			}
		}
		if r.Violation != nil {
			t.Fatalf("%v\n%s", r.Violation, src)
		}
	}
	check(t, twoPassesOneHandle)
	rapid.Check(t, func(t *rapid.T) { check(t, genScenario(t)) })
}

// TestForgettingCoreStopsTheSearch: a core whose bounded memory forgets
// an entry may behave unlike another that encodes alike (the order it
// forgets in is not in its state key), so the search reports it instead of
// going on with merged states. Cores with room for one freed value forget
// the first when a second is freed.
func TestForgettingCoreStopsTheSearch(t *testing.T) {
	sc, err := Parse("two_frees.rref", []byte(`workers A
new A x 1
new A y 2
release A x
release A y
settle
expect clean
`))
	if err != nil {
		t.Fatal(err)
	}
	if r := Explore(sc, Options{Workers: 1}); !r.Passed() {
		t.Fatalf("with the default bounds: %v", r.Violation)
	}
	tiny := func(self WorkerID) *core.Core {
		var seed [32]byte
		return core.New(self, core.WithIDSeed(seed), core.WithTombstones(1))
	}
	r := Explore(sc, Options{Workers: 1, Factory: tiny})
	if r.Passed() || r.Violation.Invariant != InvariantStateKey {
		t.Fatalf("a core that forgot went unreported: %+v", r.Violation)
	}
}
