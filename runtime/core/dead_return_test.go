package core_test

import (
	"testing"

	"github.com/rrefkit/rref/runtime/core"
)

// A function that returns an RRef to a caller that died while it ran must not
// pin a child for the dead caller (a user) nor count a fork it holds (the
// owner): the CallRet is dropped with the caller, and nothing would ever
// answer the pin or delete the fork, so the value leaked (found by the soak:
// a kill during a return left the user draining and the owner holding it).
func TestReturnToDeadCallerKeepsNothing(t *testing.T) {
	for _, returner := range []string{"user", "owner"} {
		t.Run(returner, func(t *testing.T) {
			a, b, h, _, _ := pair(t)
			c := core.New(3)
			ret, hret := a, h // A (1) holds a user handle
			if returner == "owner" {
				ret = b
				hret = b.NewLocal([]byte("w"))
			}
			self := core.WorkerID(1)
			if returner == "owner" {
				self = 2
			}
			if _, err := c.Call(self, "f", nil, nil); err != nil {
				t.Fatal(err)
			}
			call := c.TakeReady().Messages[0].Msg
			if err := ret.Deliver(3, call); err != nil {
				t.Fatal(err)
			}
			runs := ret.TakeReady().Runs
			if len(runs) != 1 {
				t.Fatalf("runs %v, want the call", runs)
			}
			ret.PeerFailed(3) // the caller dies while its function runs
			ret.TakeReady()
			if err := ret.Return(3, runs[0].CallID, nil, []core.HandleID{hret}, core.Failure{}); err != nil {
				t.Fatal(err)
			}
			if r := ret.TakeReady(); len(r.Messages) != 0 {
				t.Errorf("sent %v to a dead worker", r.Messages)
			}
			if err := ret.Release(hret); err != nil {
				t.Fatal(err)
			}
			if returner == "owner" {
				if err := a.Release(h); err != nil { // the pair's own value
					t.Fatal(err)
				}
			}
			for _, e := range a.TakeReady().Messages {
				if err := b.Deliver(1, e.Msg); err != nil {
					t.Fatal(err)
				}
			}
			b.TakeReady()
			for name, k := range map[string]*core.Core{"A": a, "B": b} {
				if n := k.Counters(); !n.Clean() {
					t.Errorf("%s keeps %+v after the return to a dead caller and the release\n%s", name, n, k.Dump())
				}
			}
		})
	}
}
