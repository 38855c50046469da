package core

import (
	"testing"

	"github.com/rrefkit/rref/generated/rref"
)

// cancelledFunctions has worker 1 send two calls with one call id, each
// waiting for its RRef argument's confirmation, then cancel that id; it
// returns the functions that run cancelled once both are confirmed.
func cancelledFunctions(t *testing.T) string {
	t.Helper()
	c := New(3, WithIDSeed([32]byte{1}))
	value := RRefID{Worker: 2, Local: 100}
	desc := func(n uint64) rref.RRefDesc {
		return rref.RRefDesc{Owner: 2, RRef: value, Fork: ForkID{Worker: 1, Local: n}, Parent: ForkID{Worker: 1, Local: 99}}
	}
	for i, fn := range []string{"a", "b"} {
		if err := c.Deliver(1, &rref.Call{CallID: 7, Function: fn, RRefs: []rref.RRefDesc{desc(uint64(i + 1))}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Deliver(1, &rref.CallCancel{CallID: 7}); err != nil {
		t.Fatal(err)
	}
	c.TakeReady()
	out := ""
	for i := range 2 {
		if err := c.Deliver(2, &rref.ForkAck{RRef: value, Fork: ForkID{Worker: 1, Local: uint64(i + 1)}}); err != nil {
			t.Fatal(err)
		}
		for _, r := range c.TakeReady().Runs {
			if r.Cancelled {
				out += r.Fn
			}
		}
	}
	return out
}

// TestCancelDoesNotDependOnTheHashSeed: a core is a function of its
// inputs (explorers and replays rely on it), so which waiting call a
// cancel reaches must not depend on where the id tables put their keys,
// which the process's hash seed decides.
func TestCancelDoesNotDependOnTheHashSeed(t *testing.T) {
	saved := idSeed
	defer func() { idSeed = saved }()
	seen := map[string]bool{}
	for s := range uint64(64) {
		idSeed = [2]uint64{s*0x9e3779b97f4a7c15 | 1, s}
		seen[cancelledFunctions(t)] = true
	}
	if len(seen) != 1 {
		t.Fatalf("one input, several outputs under different seeds: %v", seen)
	}
}
