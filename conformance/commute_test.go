package conformance

import (
	"bytes"
	"cmp"
	"fmt"
	"slices"
	"testing"

	"github.com/rrefkit/rref/explore"
)

// commuteStates bounds, per scenario, the states whose every pair of steps
// TestIndependentStepsCommute checks: enough to reach each scenario's
// crashes, fetches and deletes, within the default test run's time.
const commuteStates = 600

// TestIndependentStepsCommute checks the world's footprints against its
// steps. Over the states of every corpus scenario (and the enumerated
// programs' first), for every pair of enabled steps a and b whose
// footprints are independent: each stays enabled after the other, both
// orders reach the same state (encoded afresh, caches ignored) with the
// same verdict, and each step's footprint is the same after the other as
// before it. The sleep sets are sound exactly when this holds: a location
// a step reads or writes but does not record breaks it here.
func TestIndependentStepsCommute(t *testing.T) {
	scs, err := Corpus()
	if err != nil {
		t.Fatal(err)
	}
	Enumerate(Bound{Workers: 3, Commands: 3}, func(sc *Scenario) bool {
		scs = append(scs, sc)
		return len(scs) < 120
	})
	independent := 0
	for _, unreduced := range []bool{false, true} {
		for _, sc := range sampled(scs) {
			n, err := checkCommuting(sc, unreduced)
			if err != nil {
				t.Fatalf("%s (unreduced %v): %v", sc.Name, unreduced, err)
			}
			independent += n
		}
	}
	// The check is only as good as the pairs it met.
	if independent < 10000 {
		t.Fatalf("only %d independent pairs checked", independent)
	}
	t.Logf("%d independent pairs commute", independent)
}

// checkCommuting walks sc's states breadth-first and checks every pair of
// steps in each; it returns how many pairs were independent.
func checkCommuting(sc *Scenario, unreduced bool) (int, error) {
	key := func(w *world) string {
		f := w.Clone()
		f.fresh = true
		return string(f.AppendState(nil))
	}
	start := newWorld(sc, nil, unreduced)
	seen := map[string]bool{key(start): true}
	queue := []*world{start}
	independent := 0
	for len(queue) > 0 && len(seen) < commuteStates {
		s := queue[0]
		queue = queue[1:]
		if s.Violation() != nil {
			continue
		}
		cs := s.Choices()
		next := make([]*world, len(cs))
		fps := make([]explore.Footprint, len(cs))
		for i, c := range cs {
			next[i] = s.Clone()
			next[i].Step(c)
			fps[i] = *next[i].Footprint()
			if k := key(next[i]); !seen[k] {
				seen[k] = true
				queue = append(queue, next[i])
			}
		}
		for i := range cs {
			for j := i + 1; j < len(cs); j++ {
				if !fps[i].Independent(&fps[j]) {
					// The search asks the world next (explore.Reorderer).
					ei, _ := s.Event(cs[i])
					ej, _ := s.Event(cs[j])
					if !s.Commutes(ei, ej, &fps[i], &fps[j]) {
						continue
					}
				}
				independent++
				ab, fb, err := stepEvent(next[i], s, cs[j])
				if err != nil {
					return independent, err
				}
				ba, fa, err := stepEvent(next[j], s, cs[i])
				if err != nil {
					return independent, err
				}
				what := fmt.Sprintf("%s and %s (independent)", s.Describe(cs[i]), s.Describe(cs[j]))
				if !fb.Equal(&fps[j]) || !fa.Equal(&fps[i]) {
					return independent, fmt.Errorf("%s: a step's footprint changed after the other step", what)
				}
				if (ab.Violation() == nil) != (ba.Violation() == nil) {
					return independent, fmt.Errorf("%s: one order breaks an invariant, the other not: %v / %v", what, ab.Violation(), ba.Violation())
				}
				if !bytes.Equal([]byte(key(ab)), []byte(key(ba))) {
					return independent, fmt.Errorf("%s: the two orders reach different states", what)
				}
				// Beyond the state key: everything the world keeps, so that a
				// record missing on a part the key leaves out shows too.
				if fa, fb := fullDump(ab), fullDump(ba); fa != fb {
					return independent, fmt.Errorf("%s: the two orders leave the world different beyond its state key:\n%s\n%s", what, fa, fb)
				}
			}
		}
	}
	return independent, nil
}

// stepEvent takes, from w, the step that is choice c of s (found by its
// event), and returns the new world and the step's footprint.
func stepEvent(w, s *world, c int) (*world, explore.Footprint, error) {
	ev, _ := s.Event(c)
	for _, d := range w.Choices() {
		if e, _ := w.Event(d); e == ev {
			n := w.Clone()
			n.Step(d)
			return n, *n.Footprint(), nil
		}
	}
	return nil, explore.Footprint{}, fmt.Errorf("%s is no longer enabled after an independent step", s.Describe(c))
}

// TestSleepSetsEnterEveryState is the differential test of the sleep sets:
// they prune transitions, never states. On every corpus scenario and every
// enumerated program of up to three commands over two workers, the search
// with them enters exactly the states the search without them does, with
// the same verdict, on one worker and on two; and it takes fewer
// transitions in all.
func TestSleepSetsEnterEveryState(t *testing.T) {
	scs, err := Corpus()
	if err != nil {
		t.Fatal(err)
	}
	scs = sampled(scs)
	Enumerate(Bound{Workers: 2, Commands: 3}, func(sc *Scenario) bool {
		scs = append(scs, sc)
		return true
	})
	var pruned, full int64
	for _, sc := range scs {
		u := Explore(sc, Options{Workers: 1, NoSleepSets: true})
		full += u.Transitions
		for _, workers := range []int{1, 2} {
			// The world is asked about conflicting steps from the start,
			// not only in large searches.
			r := Explore(sc, Options{Workers: workers, reorderAfter: -1})
			if workers == 1 {
				pruned += r.Transitions
			}
			if r.Truncated != "" || u.Truncated != "" {
				t.Fatalf("%s: bound reached: %s %s", sc.Name, r.Truncated, u.Truncated)
			}
			if r.States != u.States || verdict(r) != verdict(u) || !r.Reduced {
				t.Errorf("%s, %d workers: %d states (%s) with sleep sets, %d (%s) without", sc.Name, workers, r.States, verdict(r), u.States, verdict(u))
			}
		}
	}
	if pruned >= full {
		t.Errorf("sleep sets took %d transitions, the full search %d", pruned, full)
	}
	t.Logf("%d scenarios: %d transitions with sleep sets, %d without", len(scs), pruned, full)
}

// fullDump prints everything a world keeps but its cores (which the state
// key covers by digest) and the order of its messages in flight: the
// monitor's facts and the program's records, the key's parts included, with
// pointers followed and each fork's children as a set.
func fullDump(w *world) string {
	deref := func(m map[handleKey]*progHandle) map[handleKey]progHandle {
		out := map[handleKey]progHandle{}
		for k, v := range m {
			out[k] = *v
		}
		return out
	}
	fetches := func(m map[handleKey]*fetchState) map[handleKey]fetchState {
		out := map[handleKey]fetchState{}
		for k, v := range m {
			out[k] = *v
		}
		return out
	}
	ids := map[[2]uint64]fetchState{}
	for k, v := range w.p.fetchIDs.untracked() {
		ids[k] = *v
	}
	children := map[ForkID][]ForkID{}
	for k, v := range w.mon.children.untracked() {
		c := slices.Clone(v)
		slices.SortFunc(c, func(a, b ForkID) int { return cmp.Or(cmp.Compare(a.Worker, b.Worker), cmp.Compare(a.Local, b.Local)) })
		children[k] = c
	}
	m := w.mon
	return fmt.Sprintf("pc %d returning %v dups %v\nhandles %v\nfetches %v\nfetchIDs %v\nreturns %v\ntravel %v\n"+
		"values %v failing %v deletes %v answered %v refused %v children %v path %v exempt %v exemptRRef %v remoteArrived %v owners %v crashed %v",
		w.prog.PC(), w.returning, w.p.dups, deref(w.p.handles.untracked()), fetches(w.p.fetches.untracked()), ids, w.p.returns.untracked(), w.p.travel.untracked(),
		m.values.untracked(), m.failing.untracked(), m.deletes.untracked(), m.answered.untracked(), m.refused.untracked(), children, m.path.untracked(), m.exempt.untracked(), m.exemptRRef.untracked(), m.remoteArrived.untracked(), m.owners.untracked(), m.crashed)
}
