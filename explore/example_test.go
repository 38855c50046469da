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
