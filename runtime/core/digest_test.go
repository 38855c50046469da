package core_test

import (
	"testing"

	"github.com/rrefkit/rref/generated/rref"
	"github.com/rrefkit/rref/runtime/core"
)

// TestStateDigestTellsStatesApart: pairs of cores that differ in one part
// of their state only, each part one a sabotage of the encoding or of its
// digest's combination once left out unnoticed by the corpus (review):
// the count of Ticks, which peer is dead, which worker a call went to, a
// cancel that came before its call. Each pair must digest differently,
// and equal states equally.
func TestStateDigestTellsStatesApart(t *testing.T) {
	pairs := []struct {
		what string
		a, b func(c *core.Core)
	}{
		{"ticks", func(c *core.Core) {}, func(c *core.Core) { c.Tick() }},
		{"the dead peer", func(c *core.Core) { c.PeerFailed(3) }, func(c *core.Core) { c.PeerFailed(4) }},
		{"the callee", func(c *core.Core) { c.Call(3, "f", nil, nil) }, func(c *core.Core) { c.Call(4, "f", nil, nil) }},
		{"an early cancel", func(c *core.Core) {}, func(c *core.Core) { c.Deliver(3, &rref.CallCancel{CallID: 9}) }},
		{"an early cancel's sender", func(c *core.Core) { c.Deliver(3, &rref.CallCancel{CallID: 9}) }, func(c *core.Core) { c.Deliver(4, &rref.CallCancel{CallID: 9}) }},
	}
	seed := [32]byte{1}
	for _, p := range pairs {
		mk := func(f func(c *core.Core)) *core.Core {
			c := core.New(1, core.WithIDSeed(seed))
			c.StateDigest() // cached before the change: the change must drop it
			f(c)
			c.TakeReady()
			return c
		}
		a, b, again := mk(p.a), mk(p.b), mk(p.a)
		if a.StateDigest() == b.StateDigest() {
			t.Errorf("%s: two states digest alike", p.what)
		}
		if a.StateDigest() != again.StateDigest() {
			t.Errorf("%s: one state digests two ways", p.what)
		}
		if a.StateDigest() != a.RecomputeStateDigest() || b.StateDigest() != b.RecomputeStateDigest() {
			t.Errorf("%s: a cached digest is stale", p.what)
		}
	}
}
