package explore_test

import (
	"fmt"

	"github.com/rrefkit/rref/explore"
)

// counters is a model of two processes that each add one to a shared
// counter in two steps (read, then write), without a lock: a lost update.
type counters struct {
	shared int
	read   [2]int // what each process read
	pc     [2]int // 0: to read, 1: to write, 2: done
	failed *explore.Violation
}

func (c *counters) Choices() []int {
	var out []int
	for p := range 2 {
		if c.pc[p] < 2 {
			out = append(out, p)
		}
	}
	return out
}

func (c *counters) Step(p int) {
	if c.pc[p] == 0 {
		c.read[p] = c.shared
	} else {
		c.shared = c.read[p] + 1
	}
	c.pc[p]++
}

func (c *counters) Clone() *counters { n := *c; return &n }
func (c *counters) AppendState(b []byte) []byte {
	return fmt.Appendf(b, "%d %v %v", c.shared, c.read, c.pc)
}
func (c *counters) Violation() *explore.Violation { return c.failed }
func (c *counters) CheckEnd() {
	if c.shared != 2 {
		c.failed = &explore.Violation{Invariant: "NoLostUpdate", Detail: fmt.Sprintf("the counter ends at %d", c.shared)}
	}
}
func (c *counters) Describe(p int) string {
	return fmt.Sprintf("process %d %s", p, []string{"reads", "writes"}[c.pc[p]])
}
func (c *counters) ChoiceKey(p int) string { return fmt.Sprint(p) }

// Explore finds the lost update and prints the shortest schedule that
// shows it.
func Example() {
	// explore.Replay runs r.Schedule again, step by step.
	r := explore.Explore(func() *counters { return &counters{} }, explore.Options{})
	fmt.Println(r.Violation)
	for _, step := range r.Trace {
		fmt.Println(step)
	}
	// Output:
	// NoLostUpdate: the counter ends at 1
	// process 0 reads
	// process 1 reads
	// process 0 writes
	// process 1 writes
}

// tallies is a model of three processes that each count their own tally
// up to three. Its steps say what they touch (explore.Commuter): process p
// writes tally p and nothing else, so steps of different processes commute.
type tallies struct {
	n  [3]int
	fp explore.Footprint
}

const tallyTable = 0 // the table of the tallies' locations, by process

func (t *tallies) Choices() []int {
	var out []int
	for p, n := range t.n {
		if n < 3 {
			out = append(out, p)
		}
	}
	return out
}

func (t *tallies) Step(p int) {
	t.fp.Reset()
	t.fp.Write(explore.Location(tallyTable, uint64(p)))
	t.n[p]++
}

func (t *tallies) Clone() *tallies               { n := *t; return &n }
func (t *tallies) AppendState(b []byte) []byte   { return fmt.Appendf(b, "%v", t.n) }
func (t *tallies) Violation() *explore.Violation { return nil }
func (t *tallies) CheckEnd()                     {}
func (t *tallies) Describe(p int) string         { return fmt.Sprintf("process %d counts", p) }
func (t *tallies) ChoiceKey(p int) string        { return fmt.Sprint(p) }
func (t *tallies) Footprint() *explore.Footprint { return &t.fp }
func (t *tallies) Event(p int) (explore.Event, bool) {
	return explore.Event{uint64(p), uint64(t.n[p])}, true // process p's next step
}

// A model that says what its steps touch lets the search take one order of
// steps that commute (sleep sets): it still enters every state, with far
// fewer transitions; NoSleepSets walks every order, and counts them.
func Example_commuter() {
	start := func() *tallies { return &tallies{} }
	full := explore.Explore(start, explore.Options{NoSleepSets: true})
	fmt.Printf("every order: %d states, %d transitions, %g schedules\n", full.States, full.Transitions, full.Schedules)
	r := explore.Explore(start, explore.Options{})
	fmt.Printf("sleep sets:  %d states, %d transitions\n", r.States, r.Transitions)
	// Output:
	// every order: 64 states, 144 transitions, 1680 schedules
	// sleep sets:  64 states, 63 transitions
}

// racers is a model of three runners, each taking two strides in any
// order with the others: interchangeable, since they run alike.
type racers struct{ at [3]int }

func (r *racers) Choices() []int {
	var out []int
	for i, a := range r.at {
		if a < 2 {
			out = append(out, i)
		}
	}
	return out
}
func (r *racers) Step(i int)                    { r.at[i]++ }
func (r *racers) Clone() *racers                { n := *r; return &n }
func (r *racers) AppendState(b []byte) []byte   { return fmt.Appendf(b, "%v", r.at) }
func (r *racers) Violation() *explore.Violation { return nil }
func (r *racers) CheckEnd()                     {}
func (r *racers) Describe(i int) string         { return fmt.Sprintf("runner %d strides", i) }
func (r *racers) ChoiceKey(i int) string        { return fmt.Sprint(i) }

// Symmetry and AppendPermuted make racers an explore.Symmetric: one group
// of three runners, and the state with runner i at p.Rename(0, i).
func (r *racers) Symmetry() []int { return []int{3} }
func (r *racers) AppendPermuted(b []byte, p explore.Permutation) []byte {
	var at [3]int
	for j := range at {
		at[j] = r.at[p.Original(0, j)]
	}
	return fmt.Appendf(b, "%v", at)
}

// A model whose instances are interchangeable lets the search keep one
// state of each class alike but for their names: 3³ = 27 states, 10
// classes (the multisets of three counts in 0..2), the same schedules.
func Example_symmetric() {
	start := func() *racers { return &racers{} }
	full := explore.Explore(start, explore.Options{NoSymmetry: true})
	sym := explore.Explore(start, explore.Options{})
	fmt.Printf("every state: %d states, %g schedules\n", full.States, full.Schedules)
	fmt.Printf("symmetry:    %d states, %g schedules, %d renamings\n", sym.States, sym.Schedules, sym.Renamings)
	// Output:
	// every state: 27 states, 90 schedules
	// symmetry:    10 states, 90 schedules, 6 renamings
}
