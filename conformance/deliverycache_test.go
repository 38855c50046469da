package conformance

import (
	"testing"

	"github.com/rrefkit/rref/explore"
	"pgregory.net/rapid"
)

// TestDeliveryCacheChangesNothing: the world remembers what each delivery
// made, by the receiving core's digest and the message's, and replays it
// (world.deliver). A key that leaves out anything the core's answer
// depends on would hand one state another's result. Over the corpus and
// every program of the 2x3 enumeration, on one worker, the search with
// the cache must take exactly the transitions, enter exactly the states
// and reach exactly the verdict of the search without it, with sleep sets
// and without (where the schedules, counted exactly, must agree too).
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
	hits := 0
	for _, sc := range scs {
		for _, noSleep := range []bool{false, true} {
			c := Explore(sc, Options{Workers: 1, NoSleepSets: noSleep})
			u := Explore(sc, Options{Workers: 1, NoSleepSets: noSleep, noDeliveryCache: true})
			if c.Truncated != "" || u.Truncated != "" {
				t.Fatalf("%s: bound reached: %s %s", sc.Name, c.Truncated, u.Truncated)
			}
			if c.States != u.States || c.Transitions != u.Transitions || c.Schedules != u.Schedules || verdict(c) != verdict(u) {
				t.Errorf("%s (sleep sets %v): cached %d states, %d transitions, %v schedules, %s; uncached %d, %d, %v, %s",
					sc.Name, !noSleep, c.States, c.Transitions, c.Schedules, verdict(c), u.States, u.Transitions, u.Schedules, verdict(u))
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
