package explore

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// symProcs is procs with its processes declared interchangeable: they all
// count to one limit, so a state renamed is the same state for every step.
type symProcs struct{ *procs }

func (p symProcs) Clone() symProcs { return symProcs{p.procs.Clone()} }
func (p symProcs) Symmetry() []int { return []int{len(p.at)} }
func (p symProcs) AppendPermuted(b []byte, perm Permutation) []byte {
	for j := range p.at {
		b = fmt.Appendf(b, "%d,", p.at[perm.Original(0, j)])
	}
	return b
}

// TestSymmetryCountsClasses: three processes counting to three have 4³ = 64
// states, and C(3+3, 3) = 20 classes of them up to renaming (the multisets
// of three counts in 0..3); the schedules, 9!/(3!3!3!) = 1680, are the
// model's own, counted exactly under symmetry as without it.
func TestSymmetryCountsClasses(t *testing.T) {
	start := func() symProcs { return symProcs{newProcs(3, 3)} }
	for _, workers := range []int{1, 2} {
		full := Explore(start, Options{Workers: workers, NoSymmetry: true})
		sym := Explore(start, Options{Workers: workers})
		if full.States != 64 || full.Schedules != 1680 || full.Renamings != 0 {
			t.Errorf("workers %d, no symmetry: %d states, %g schedules, %d renamings", workers, full.States, full.Schedules, full.Renamings)
		}
		if sym.States != 20 || sym.Schedules != 1680 || sym.Renamings != 6 || !sym.Passed() || sym.Truncated != "" {
			t.Errorf("workers %d, symmetry: %d states, %g schedules, %d renamings, %q", workers, sym.States, sym.Schedules, sym.Renamings, sym.Truncated)
		}
		if sym.Transitions >= full.Transitions {
			t.Errorf("workers %d: symmetry took %d transitions, no fewer than the %d without", workers, sym.Transitions, full.Transitions)
		}
	}
}

// mutexes is n clients that each take a lock once: request it, acquire it
// when free, release it. The lock names its holder, so a renaming renames
// the holder too. broken lets a client acquire a lock held by another.
type mutexes struct {
	st     []int // by client: mutexIdle, mutexWaiting, mutexHolding, mutexDone
	holder int   // 1 + the holding client; 0: free
	broken bool
	failed *Violation
}

const (
	mutexIdle = iota
	mutexWaiting
	mutexHolding
	mutexDone
)

func newMutexes(n int, broken bool) *mutexes {
	return &mutexes{st: make([]int, n), broken: broken}
}

// Choices are the clients that can act.
func (m *mutexes) Choices() []int {
	var out []int
	for i, s := range m.st {
		if s == mutexIdle || s == mutexHolding || s == mutexWaiting && (m.holder == 0 || m.broken) {
			out = append(out, i)
		}
	}
	return out
}

func (m *mutexes) Step(i int) {
	switch m.st[i] {
	case mutexIdle:
		m.st[i] = mutexWaiting
	case mutexWaiting:
		m.st[i], m.holder = mutexHolding, i+1
		if n := len(slices.DeleteFunc(slices.Clone(m.st), func(s int) bool { return s != mutexHolding })); n > 1 {
			m.failed = &Violation{Invariant: "mutex", Detail: fmt.Sprintf("%d clients hold the lock", n)}
		}
	case mutexHolding:
		m.st[i], m.holder = mutexDone, 0
	}
}

func (m *mutexes) Clone() *mutexes {
	n := *m
	n.st = slices.Clone(m.st)
	return &n
}

func (m *mutexes) AppendState(b []byte) []byte { return fmt.Appendf(b, "%v %d", m.st, m.holder) }

func (m *mutexes) Symmetry() []int { return []int{len(m.st)} }

func (m *mutexes) AppendPermuted(b []byte, p Permutation) []byte {
	st := make([]int, len(m.st))
	for j := range st {
		st[j] = m.st[p.Original(0, j)]
	}
	holder := m.holder
	if holder > 0 {
		holder = p.Rename(0, holder-1) + 1
	}
	return fmt.Appendf(b, "%v %d", st, holder)
}

func (m *mutexes) Violation() *Violation { return m.failed }
func (m *mutexes) CheckEnd()             {}
func (m *mutexes) Describe(i int) string {
	return fmt.Sprintf("client %d %s", i, []string{"requests", "acquires", "releases"}[m.st[i]])
}
func (m *mutexes) ChoiceKey(i int) string { return fmt.Sprint(i) }

// TestSymmetryWithReferences: n clients of the lock are in one of idle,
// waiting or done each, or one of them holds it: 3ⁿ + n·3ⁿ⁻¹ states. Up to
// renaming, the multisets of n of those three, C(n+2, 2), and of n-1 with
// a holder, C(n+1, 2): for 3 clients 54 states in 10+6 = 16 classes, for 5
// clients 648 in 21+15 = 36. The holder is a number that the renaming
// must rename too: a model that left it alone would tell apart states
// that are alike, and count more classes (how many more depends on which
// state of each class the search meets first).
func TestSymmetryWithReferences(t *testing.T) {
	for _, c := range []struct{ n, states, classes int }{{3, 54, 16}, {5, 648, 36}} {
		start := func() *mutexes { return newMutexes(c.n, false) }
		for _, workers := range []int{1, 2} {
			full := Explore(start, Options{Workers: workers, NoSymmetry: true})
			sym := Explore(start, Options{Workers: workers})
			if !full.Passed() || !sym.Passed() || full.States != c.states || sym.States != c.classes || sym.Schedules != full.Schedules {
				t.Errorf("%d clients, workers %d: %d states and %d classes (want %d and %d), %g and %g schedules",
					c.n, workers, full.States, sym.States, c.states, c.classes, full.Schedules, sym.Schedules)
			}
		}
	}
}

// TestSymmetryTraceIsTheModels: a failure found under symmetry is reported
// on a schedule of the model's own states, which replays as it is, and is
// the shortest: two clients request, then both acquire. The depth-first
// search meets it far deeper (client 0 takes the lock and gives it back
// first), and the breadth-first search for a shorter one keys states by
// class as well.
func TestSymmetryTraceIsTheModels(t *testing.T) {
	start := func() *mutexes { return newMutexes(4, true) }
	for _, workers := range []int{1, 2} {
		r := Explore(start, Options{Workers: workers})
		if r.Passed() || r.Violation.Invariant != "mutex" || len(r.Schedule) != 4 || !r.Shortest || r.Renamings != 24 {
			t.Fatalf("workers %d: %v on %v (shortest %v: %s), %d renamings", workers, r.Violation, r.Trace, r.Shortest, r.NotShortest, r.Renamings)
		}
		again := Replay(start, r.Schedule)
		if again.Violation == nil || again.Violation.Error() != r.Violation.Error() || !slices.Equal(again.Trace, r.Trace) {
			t.Fatalf("workers %d: replay of %v: %v %v", workers, r.Schedule, again.Violation, again.Trace)
		}
	}
}

// liar's AppendPermuted leaves out part of the state: the identity's
// encoding differs from AppendState's, and the search refuses to run.
type liar struct{ *mutexes }

func (l liar) Clone() liar                                   { return liar{l.mutexes.Clone()} }
func (l liar) AppendPermuted(b []byte, p Permutation) []byte { return append(b, 'x') }

// wide declares more renamings than MaxPermutations.
type wide struct{ *mutexes }

func (w wide) Clone() wide     { return wide{w.mutexes.Clone()} }
func (w wide) Symmetry() []int { return []int{9} }

// emptyGroup declares a group of no instances.
type emptyGroup struct{ *mutexes }

func (e emptyGroup) Clone() emptyGroup { return emptyGroup{e.mutexes.Clone()} }
func (e emptyGroup) Symmetry() []int   { return []int{3, 0} }

// TestSymmetryRefused: a declaration the search cannot use is refused
// with ErrRefused, and the result is incomplete rather than a pass.
func TestSymmetryRefused(t *testing.T) {
	for name, r := range map[string]Result{
		"identity differs": Explore(func() liar { return liar{newMutexes(3, false)} }, Options{}),
		"too many":         Explore(func() wide { return wide{newMutexes(3, false)} }, Options{}),
		"empty group":      Explore(func() emptyGroup { return emptyGroup{newMutexes(3, false)} }, Options{}),
	} {
		if !errors.Is(r.Refused, ErrRefused) || r.Complete() || r.States != 0 {
			t.Errorf("%s: refused %v, truncated %q, %d states", name, r.Refused, r.Truncated, r.States)
		}
	}
	// NoSymmetry explores the model as it is, declarations unread.
	if r := Explore(func() wide { return wide{newMutexes(3, false)} }, Options{NoSymmetry: true}); r.Refused != nil || r.States != 54 {
		t.Errorf("no symmetry: %v, %d states", r.Refused, r.States)
	}
}

// TestPermutationsAreAllDistinct: groups of 3 and 2 have 3!·2! = 12
// renamings, the identity first, no two alike, each Original undoing Rename.
func TestPermutationsAreAllDistinct(t *testing.T) {
	perms, err := permutations([]int{3, 2})
	if err != nil || len(perms) != 12 {
		t.Fatalf("%d renamings, %v", len(perms), err)
	}
	seen := map[string]bool{}
	for k, p := range perms {
		key := fmt.Sprint(p.to)
		if seen[key] {
			t.Errorf("renaming %v twice", p.to)
		}
		seen[key] = true
		for g, n := range []int{3, 2} {
			for i := range n {
				if p.Original(g, p.Rename(g, i)) != i || k == 0 && p.Rename(g, i) != i {
					t.Errorf("renaming %d: group %d: %v, %v", k, g, p.to[g], p.from[g])
				}
			}
		}
	}
}

// stages is clients that each go through stages 0 to 3, one step at a
// time or, from 0, in one jump; at stage 3 a client waits, hot, and may
// spin there forever. The jumps are offered in reverse order of clients
// (the set of choices is what must be symmetric, not their order), so
// that the depth-first search enters the class of (3, 0) through (3, 0)
// itself, and the breadth-first search for the shortest lasso through
// (0, 3), whose choices are in another order.
type stages struct{ at []int }

const stageWait = 3

// Choices are client i's step (2i) or its jump (2i+1).
func (s *stages) Choices() []int {
	var out []int
	for i := range s.at {
		out = append(out, 2*i) // a step, or at stage 3 a spin
	}
	for i := len(s.at) - 1; i >= 0; i-- {
		if s.at[i] == 0 {
			out = append(out, 2*i+1)
		}
	}
	return out
}

func (s *stages) Step(c int) {
	i := c / 2
	switch {
	case c%2 == 1:
		s.at[i] = stageWait
	case s.at[i] < stageWait:
		s.at[i]++
	}
}

func (s *stages) Clone() *stages              { return &stages{at: slices.Clone(s.at)} }
func (s *stages) AppendState(b []byte) []byte { return fmt.Appendf(b, "%v", s.at) }
func (s *stages) Symmetry() []int             { return []int{len(s.at)} }
func (s *stages) AppendPermuted(b []byte, p Permutation) []byte {
	at := make([]int, len(s.at))
	for j := range at {
		at[j] = s.at[p.Original(0, j)]
	}
	return fmt.Appendf(b, "%v", at)
}
func (s *stages) Violation() *Violation { return nil }
func (s *stages) CheckEnd()             {}
func (s *stages) Describe(c int) string {
	return fmt.Sprintf("client %d %s", c/2, []string{"steps", "jumps"}[c%2])
}
func (s *stages) ChoiceKey(c int) string { return fmt.Sprint(c) }
func (s *stages) Hot() string {
	if slices.Contains(s.at, stageWait) {
		return "a client waits"
	}
	return ""
}

// TestSymmetryLassoIsTheModels: the search's graph of classes numbers the
// steps of (3, 0), the state it explored; the lasso it reports is found
// again through the model's own states, so that it replays: client 1
// jumps into (0, 3), then spins there, the step that is second in (0, 3)'s
// choices and first in (3, 0)'s.
func TestSymmetryLassoIsTheModels(t *testing.T) {
	start := func() *stages { return &stages{at: make([]int, 2)} }
	for _, workers := range []int{1, 2} {
		sym := Explore(start, Options{Liveness: true, Workers: workers})
		full := Explore(start, Options{Liveness: true, Workers: workers, NoSymmetry: true})
		for name, r := range map[string]Result{"symmetry": sym, "none": full} {
			if r.Passed() || r.Violation.Invariant != LivenessInvariant || !r.Shortest ||
				!slices.Equal(r.Schedule, []int{2}) || !slices.Equal(r.Cycle, []int{1}) {
				t.Fatalf("workers %d, %s: %v, %v then %v (%s)", workers, name, r.Violation, r.Schedule, r.Cycle, r.NotShortest)
			}
		}
		if sym.Renamings != 2 || sym.States >= full.States {
			t.Errorf("workers %d: %d renamings, %d classes against %d states", workers, sym.Renamings, sym.States, full.States)
		}
	}
}

// pair is two clients passing a token to each other, each waiting for it,
// hot, forever. Its one class of states goes round to itself in one
// step; its own states, in two.
type pair struct{ token int }

func (p *pair) Choices() []int              { return []int{0} }
func (p *pair) Step(int)                    { p.token = 1 - p.token }
func (p *pair) Clone() *pair                { n := *p; return &n }
func (p *pair) AppendState(b []byte) []byte { return fmt.Appendf(b, "%d", p.token) }
func (p *pair) Symmetry() []int             { return []int{2} }
func (p *pair) AppendPermuted(b []byte, perm Permutation) []byte {
	return fmt.Appendf(b, "%d", perm.Rename(0, p.token))
}
func (p *pair) Violation() *Violation { return nil }
func (p *pair) CheckEnd()             {}
func (p *pair) Describe(int) string   { return "pass the token" }
func (p *pair) ChoiceKey(int) string  { return "pass" }
func (p *pair) Hot() string           { return "both wait" }

// TestSymmetryCycleOfRenamings: the cycle of the class is a step; the
// model's own cycle, reported and replayed, is two.
func TestSymmetryCycleOfRenamings(t *testing.T) {
	r := Explore(func() *pair { return &pair{} }, Options{Liveness: true})
	if r.Passed() || r.Violation.Invariant != LivenessInvariant || len(r.Schedule) != 0 || !slices.Equal(r.Cycle, []int{0, 0}) || r.States != 1 {
		t.Fatalf("%v: %v then %v, %d states", r.Violation, r.Schedule, r.Cycle, r.States)
	}
}

// TestSymmetryOffUnderWeakFairness: fairness is judged per agent, which a
// renaming renames: the search explores the model's own states.
func TestSymmetryOffUnderWeakFairness(t *testing.T) {
	r := Explore(func() *stages { return &stages{at: make([]int, 2)} }, Options{WeakFairness: true})
	full := Explore(func() *stages { return &stages{at: make([]int, 2)} }, Options{WeakFairness: true, NoSymmetry: true})
	if r.Renamings != 0 || r.States != full.States || r.Passed() != full.Passed() {
		t.Fatalf("%d renamings, %d states against %d, %v against %v", r.Renamings, r.States, full.States, r.Violation, full.Violation)
	}
}

// symCommuter is symProcs whose steps say what they touch: process p's
// step writes its own count.
type symCommuter struct {
	symProcs
	fp *Footprint
}

func (s symCommuter) Clone() symCommuter { return symCommuter{s.symProcs.Clone(), new(Footprint)} }
func (s symCommuter) Step(c int) {
	s.fp.Reset()
	s.fp.Write(Location(0, uint64(c)))
	s.symProcs.Step(c)
}
func (s symCommuter) Footprint() *Footprint     { return s.fp }
func (s symCommuter) Event(c int) (Event, bool) { return Event{uint64(c), uint64(s.at[c])}, true }

// TestSymmetryTurnsSleepSetsOff: the events a state left asleep are named
// as in the state explored; another state of its class names them
// otherwise, so sleep sets are off under symmetry, and the schedules are
// counted.
func TestSymmetryTurnsSleepSetsOff(t *testing.T) {
	start := func() symCommuter { return symCommuter{symProcs{newProcs(3, 3)}, new(Footprint)} }
	sym := Explore(start, Options{})
	slept := Explore(start, Options{NoSymmetry: true})
	if sym.Reduced || sym.States != 20 || sym.Schedules != 1680 || !slept.Reduced || slept.States != 64 {
		t.Fatalf("symmetry: reduced %v, %d states, %g schedules; sleep sets: reduced %v, %d states", sym.Reduced, sym.States, sym.Schedules, slept.Reduced, slept.States)
	}
}

// lopsided declares its two clients interchangeable, and is not: the token
// passes from client 0 to client 1, and from client 1 to no one. Its
// classes go round a hot cycle (0 and 1 are one class, and 0 steps to 1);
// its own states do not, and the search says the model lies.
type lopsided struct{ token int } // 2: no one holds it

func (l *lopsided) Choices() []int {
	if l.token == 2 {
		return nil
	}
	return []int{0}
}
func (l *lopsided) Step(int)                    { l.token++ }
func (l *lopsided) Clone() *lopsided            { n := *l; return &n }
func (l *lopsided) AppendState(b []byte) []byte { return fmt.Appendf(b, "%d", l.token) }
func (l *lopsided) Symmetry() []int             { return []int{2} }
func (l *lopsided) AppendPermuted(b []byte, p Permutation) []byte {
	if l.token == 2 {
		return append(b, '2')
	}
	return fmt.Appendf(b, "%d", p.Rename(0, l.token))
}
func (l *lopsided) Violation() *Violation { return nil }
func (l *lopsided) CheckEnd()             {}
func (l *lopsided) Describe(int) string   { return "pass the token on" }
func (l *lopsided) ChoiceKey(int) string  { return "pass" }
func (l *lopsided) Hot() string {
	if l.token < 2 {
		return "a client waits"
	}
	return ""
}

// TestSymmetryThatIsNotIsReported: a lasso among classes that no cycle of
// the model's own states follows is reported as the model's fault, not as
// a liveness violation; without symmetry the model passes.
func TestSymmetryThatIsNotIsReported(t *testing.T) {
	r := Explore(func() *lopsided { return &lopsided{} }, Options{Liveness: true})
	if r.Passed() || r.Violation.Invariant != "symmetry" || !strings.Contains(r.Violation.Detail, "not symmetric") || r.Shortest {
		t.Fatalf("%v (shortest %v)", r.Violation, r.Shortest)
	}
	if full := Explore(func() *lopsided { return &lopsided{} }, Options{Liveness: true, NoSymmetry: true}); !full.Passed() {
		t.Fatalf("without symmetry: %v", full.Violation)
	}
}
