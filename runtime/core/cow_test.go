package core_test

import (
	"bytes"
	"testing"

	"github.com/rrefkit/rref/generated/rref"
	"github.com/rrefkit/rref/runtime/core"
	"pgregory.net/rapid"
)

// TestCopyOnWriteAndDigestCache drives three cores through random
// operations (values made, remotes, calls passing handles, fetches,
// releases, runs completed, ticks that expire awaiting records, crashes,
// deliveries in any order) and, around every one, checks the two promises
// of cow.go: a clone taken before the operation still encodes as it did
// (the operation wrote nothing the clone shares), and the cached digest
// equals one computed afresh (every write dropped its table's digest).
//
// Ten rounds of rapid's checks: a missed write shows in a few dozen
// programs, and each costs well under a millisecond.
func TestCopyOnWriteAndDigestCache(t *testing.T) {
	for range cowRounds {
		rapid.Check(t, copyOnWriteProgram)
		if t.Failed() {
			return
		}
	}
}

const cowRounds = 10

func copyOnWriteProgram(t *rapid.T) {
	const n = 3
	cores := make([]*core.Core, n)
	for i := range cores {
		var seed [32]byte
		seed[0] = byte(i)
		cores[i] = core.New(rref.WorkerID(i+1), core.WithIDSeed(seed), core.WithPendingTicks(2))
	}
	var net []core.Envelope
	var runs [n][]core.Run
	handles := make([][]core.HandleID, n)
	dead := make([]bool, n)
	collect := func(i int) {
		r := cores[i].TakeReady()
		for _, e := range r.Messages {
			if !dead[e.To-1] {
				net = append(net, e)
			}
		}
		runs[i] = append(runs[i], r.Runs...)
		for _, c := range r.Calls {
			handles[i] = append(handles[i], c.Handles...)
		}
		for _, run := range r.Runs {
			handles[i] = append(handles[i], run.Handles...)
		}
	}
	pick := func(hs []core.HandleID, label string) (core.HandleID, bool) {
		if len(hs) == 0 {
			return 0, false
		}
		return hs[rapid.IntRange(0, len(hs)-1).Draw(t, label)], true
	}
	for step := range rapid.IntRange(1, 60).Draw(t, "steps") {
		i := rapid.IntRange(0, n-1).Draw(t, "worker")
		if dead[i] {
			continue
		}
		c := cores[i]
		clone := c.Clone()
		before := clone.AppendState(nil)
		to := rref.WorkerID(rapid.IntRange(1, n).Draw(t, "to"))
		switch op := rapid.IntRange(0, 9).Draw(t, "op"); op {
		case 0:
			handles[i] = append(handles[i], c.NewLocal([]byte{byte(step)}))
		case 1:
			refs := []core.HandleID{}
			if h, ok := pick(handles[i], "arg"); ok && rapid.Bool().Draw(t, "with arg") {
				refs = append(refs, h)
			}
			if h, err := c.Remote(to, "f", nil, refs); err == nil {
				handles[i] = append(handles[i], h)
			}
		case 2:
			if h, ok := pick(handles[i], "passed"); ok {
				c.Call(to, "g", nil, []core.HandleID{h})
			}
		case 3:
			if h, ok := pick(handles[i], "fetched"); ok {
				c.Fetch(h)
			}
		case 4:
			if h, ok := pick(handles[i], "released"); ok {
				c.Release(h)
			}
		case 5:
			if len(runs[i]) > 0 {
				run := runs[i][0]
				runs[i] = runs[i][1:]
				if run.Kind == core.RunRemote {
					c.CompleteRemote(run.RRef, []byte("v"), core.Failure{})
				} else {
					c.Return(run.From, run.CallID, nil, nil, core.Failure{})
				}
			}
		case 6:
			c.Tick()
		case 7:
			if rapid.IntRange(0, 4).Draw(t, "crash?") == 0 && int(to) != i+1 {
				dead[to-1] = true
				for j := range cores {
					if !dead[j] {
						cores[j].PeerFailed(to)
						collect(j)
					}
				}
			}
		default:
			if len(net) > 0 {
				k := rapid.IntRange(0, len(net)-1).Draw(t, "delivered")
				e := net[k]
				net = append(net[:k], net[k+1:]...)
				if !dead[e.To-1] {
					i, c = int(e.To-1), cores[e.To-1]
					clone = c.Clone()
					before = clone.AppendState(nil)
					c.Deliver(e.From, e.Msg)
				}
			}
		}
		collect(i)
		if after := clone.AppendState(nil); !bytes.Equal(before, after) {
			t.Fatalf("step %d: worker %d's operation changed a clone taken before it", step, i+1)
		}
		for j, x := range cores {
			if cached, fresh := x.StateDigest(), x.RecomputeStateDigest(); cached != fresh {
				t.Fatalf("step %d: worker %d's cached state digest is stale:\n%s", step, j+1, x.Dump())
			}
		}
	}
}
