package conformance

import (
	"fmt"
	"slices"
	"sync/atomic"
	"testing"

	"go.uber.org/goleak"
)

// eachCorpus is a heavy scenario first, then light ones, then a run of
// failing ones: side by side, the light ones finish long before the heavy
// one, and the failures finish in any order.
func eachCorpus(t *testing.T) []*Scenario {
	t.Helper()
	scs, err := Corpus()
	if err != nil {
		t.Fatal(err)
	}
	// The heaviest first, the rest in the corpus's order.
	out := slices.Clone(scs)
	heavy := slices.IndexFunc(out, func(sc *Scenario) bool { return sc.Name == heaviest[0] })
	out = slices.Insert(slices.Delete(out, heavy, heavy+1), 0, scs[heavy])
	for i := range 5 {
		sc, err := Parse(fmt.Sprintf("wrong_value_%d.rref", i), []byte(fmt.Sprintf(`workers A B
remote A B x %d
fetch A x
expect value A x %d
release A x
settle
`, i, i+1)))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, sc)
	}
	return out
}

// TestExploreEachReportsInOrder runs a corpus whose first scenario is its
// slowest on three goroutines: every result comes in the order of the
// scenarios, with the verdict and state count a search alone gives.
func TestExploreEachReportsInOrder(t *testing.T) {
	defer goleak.VerifyNone(t)
	scs := eachCorpus(t)
	alone := map[string]Result{}
	for _, sc := range scs {
		alone[sc.Name] = Explore(sc, Options{})
	}
	var got []string
	n := ExploreEach(slices.Values(scs), 3, Options{Workers: 7}, nil, func(sc *Scenario, r Result) bool {
		got = append(got, sc.Name)
		if r.Scenario != sc.Name {
			t.Errorf("the result of %s came with scenario %s", r.Scenario, sc.Name)
		}
		want := alone[sc.Name]
		if r.Passed() != want.Passed() || r.States != want.States {
			t.Errorf("%s: passed %v with %d states, alone %v with %d", sc.Name, r.Passed(), r.States, want.Passed(), want.States)
		}
		return true
	})
	var want []string
	for _, sc := range scs {
		want = append(want, sc.Name)
	}
	if !slices.Equal(got, want) || n != len(scs) {
		t.Fatalf("reported %d, in the order\n%v\nwant\n%v", n, got, want)
	}
}

// TestExploreEachStopsAtTheFirstFailureInOrder stops at the first failing
// scenario of the list, although later failures, lighter, finish before
// it: nothing after it is reported, the list is no longer pulled, and no
// goroutine is left behind.
func TestExploreEachStopsAtTheFirstFailureInOrder(t *testing.T) {
	defer goleak.VerifyNone(t)
	scs := eachCorpus(t)
	firstFail := slices.IndexFunc(scs, func(sc *Scenario) bool { return sc.Name == "wrong_value_0.rref" })
	const parallel, tail = 2, 1000 // a tail of passing scenarios longer than the window
	var pulled atomic.Int64
	stopped := false
	seq := func(yield func(*Scenario) bool) {
		for i := range len(scs) + tail {
			sc := scs[len(scs)-6] // past the list: its last passing scenario
			if i < len(scs) {
				sc = scs[i]
			}
			pulled.Add(1)
			if !yield(sc) {
				stopped = true
				return
			}
		}
	}
	var last string
	n := ExploreEach(seq, parallel, Options{}, nil, func(sc *Scenario, r Result) bool {
		if last != "" {
			t.Errorf("%s reported after the stop at %s", sc.Name, last)
		}
		if !r.Passed() {
			last = sc.Name
			return false
		}
		return true
	})
	if last != scs[firstFail].Name || n != firstFail+1 {
		t.Fatalf("stopped at %q after %d reports, want %s after %d", last, n, scs[firstFail].Name, firstFail+1)
	}
	if !stopped {
		t.Errorf("the list was not told to stop (its yield never returned false); pulled %d", pulled.Load())
	}
	if limit := int64(firstFail + 1 + parallel*eachWindow + 1); pulled.Load() > limit {
		t.Errorf("pulled %d scenarios, want at most %d past a stop", pulled.Load(), limit)
	}
}

// TestExploreEachHoldsAWindow: while the first scenario is slow, the
// others run ahead of it by at most the window, not to the end of a long
// list (an enumeration writes tens of thousands of programs).
func TestExploreEachHoldsAWindow(t *testing.T) {
	defer goleak.VerifyNone(t)
	heavy, err := Parse("chain_of_six.rref", []byte(chainOfSix)) // 37,683 states
	if err != nil {
		t.Fatal(err)
	}
	light, err := Parse("self_remote.rref", []byte("workers A\nremote A A x 1\nrelease A x\nsettle\nexpect clean\n"))
	if err != nil {
		t.Fatal(err)
	}
	const parallel, total = 2, 1000
	var pulled atomic.Int64
	seq := func(yield func(*Scenario) bool) {
		for i := range total {
			sc := light
			if i == 0 {
				sc = heavy
			}
			pulled.Add(1)
			if !yield(sc) {
				return
			}
		}
	}
	atFirst := int64(-1)
	n := ExploreEach(seq, parallel, Options{}, nil, func(sc *Scenario, r Result) bool {
		if atFirst < 0 {
			atFirst = pulled.Load()
		}
		return r.Passed()
	})
	if n != total {
		t.Fatalf("reported %d of %d", n, total)
	}
	// A token per scenario handed out and not reported, and the producer
	// holds one more it pulled while waiting for a token.
	if limit := int64(parallel*eachWindow + 1); atFirst > limit {
		t.Errorf("%d scenarios pulled while the first was still running, want at most %d", atFirst, limit)
	}
	t.Logf("%d pulled when the first was reported", atFirst)
}

// TestExploreEachWithNoScenariosOrNoParallelism: an empty list reports
// nothing and returns; a parallelism below one runs one at a time.
func TestExploreEachWithNoScenariosOrNoParallelism(t *testing.T) {
	defer goleak.VerifyNone(t)
	if n := ExploreEach(slices.Values([]*Scenario(nil)), 4, Options{}, nil, func(*Scenario, Result) bool {
		t.Error("a report with nothing to explore")
		return true
	}); n != 0 {
		t.Errorf("reported %d of none", n)
	}
	scs := eachCorpus(t)[1:4]
	var got []string
	opts := 0
	n := ExploreEach(slices.Values(scs), 0, Options{}, func(sc *Scenario, o Options) Options {
		opts++ // one goroutine: no race on the count
		return o
	}, func(sc *Scenario, r Result) bool {
		got = append(got, sc.Name)
		return true
	})
	if n != 3 || opts != 3 || got[0] != scs[0].Name || got[2] != scs[2].Name {
		t.Errorf("parallel 0: %d reported, options made %d times, order %v", n, opts, got)
	}
}
