package conformance

import (
	"bytes"
	"fmt"
	"slices"
	"strconv"

	"github.com/rrefkit/rref/generated/rref"
	"github.com/rrefkit/rref/runtime/core"
)

// Copies of worlds: a clone shares cores, the program's state and the
// monitor with its original until one writes, and worlds and cores the
// search is done with are kept for the next clones, with the deliveries
// already computed on a core (the delivery cache).

// heldCore is a core and how many worlds hold it: a world changes a core
// in place only when it alone holds it (world.core), and the last to let
// go of one gives it to the spares. A count too high is safe (a core is
// copied that needed not be), one too low is not: the search recycles
// each copy it made once (explore.Recycler), and a world no one recycles
// only keeps its cores from the spares.
type heldCore struct {
	core *core.Core
	refs int
	// counters are core's counters once counted (counted): a core no
	// world changes, such as one the cache of deliveries holds, is
	// counted once however many steps lead to it (checkCounters).
	counters core.Counters
	counted  bool
}

// spares are the worlds and cores a search is done with, for the next
// clones to reuse. They are at most as many as the search's path is deep:
// each frame of it recycles one world.
type spares struct {
	worlds []*world
	cores  []*heldCore
	// delivered remembers deliveries (world.deliver), each holding its
	// resulting core.
	delivered map[deliveryKey]*delivery
	hits      int // deliveries taken from it, for the tests
	// mismatch is the first delivery taken from the cache that differed
	// from the delivery run afresh (world.checkDeliveries).
	mismatch string
}

// deliveryKey is a delivery: the receiving core's digest and the
// message's (its sender, receiver and bytes).
type deliveryKey struct{ core, msg digest }

// handTo gives m to c, its receiver's core: a message, the notice of its
// sender's death, or its timer for a held-back RemoteRet.
func (m inFlight) handTo(c *core.Core) {
	switch {
	case m.notice:
		c.PeerFailed(m.from)
	case m.flush:
		c.FlushAck(m.ack)
	default:
		c.Deliver(m.from, m.msg)
	}
}

// recheck runs delivery m on a copy of its receiver's core and says how
// the result differs from d, the cached one ("" when it does not).
func (w *world) recheck(m inFlight, d *delivery) string {
	c := w.slots[m.to-1].held.core.Clone()
	m.handTo(c)
	r := c.TakeReady()
	var fresh, cached []byte
	for _, e := range r.Messages {
		fresh = rref.AppendFrame(strconv.AppendUint(fresh, uint64(e.To), 10), e.Msg)
	}
	for _, e := range d.ready.Messages {
		cached = rref.AppendFrame(strconv.AppendUint(cached, uint64(e.To), 10), e.Msg)
	}
	fresh = fmt.Appendf(fresh, "%+v %+v %+v %+v %+v %v %v", r.Runs, r.Fetches, r.Calls, r.Cancels, r.Freed, r.Errors, r.DeferredAcks)
	cached = fmt.Appendf(cached, "%+v %+v %+v %+v %+v %v %v", d.ready.Runs, d.ready.Fetches, d.ready.Calls, d.ready.Cancels, d.ready.Freed, d.ready.Errors, d.ready.DeferredAcks)
	if c.RecomputeStateDigest() != d.held.core.RecomputeStateDigest() || !bytes.Equal(fresh, cached) {
		what := m.String()
		if m.isMessage() {
			what = core.FormatMessage(m.msg)
		}
		return fmt.Sprintf("delivering %s from %s to %s: afresh the core became\n%s\nand produced %+v;\nthe cache holds\n%s\nand %+v",
			what, w.name(m.from), w.name(m.to), c.Dump(), r, d.held.core.Dump(), d.ready)
	}
	return ""
}

// delivery is what a delivery made: the receiver's new core, held by the
// cache, and what the core produced.
type delivery struct {
	held  *heldCore
	key   digest // the digest of held's core, which no one changes
	ready core.Ready
}

// deliveriesMax bounds the remembered deliveries: past it they are
// dropped and remembered afresh. At about 2 KB each, including the tables
// only they hold, the bound is some 30 MB.
const deliveriesMax = 1 << 14

// remember keeps what delivery k made: h's core (held from now on by the
// cache too, so that no world changes it in place) and its outputs r.
func (sp *spares) remember(k deliveryKey, h *heldCore, r core.Ready) {
	if len(sp.delivered) >= deliveriesMax {
		for _, d := range sp.delivered {
			sp.drop(d.held)
		}
		clear(sp.delivered)
	}
	if sp.delivered == nil {
		sp.delivered = map[deliveryKey]*delivery{}
	}
	h.refs++
	sp.delivered[k] = &delivery{held: h, key: digest(h.core.StateDigest()), ready: r}
}

// drop lets go of one hold on h: the last one gives it to the spares.
func (sp *spares) drop(h *heldCore) {
	if h.refs--; h.refs == 0 {
		sp.cores = append(sp.cores, h)
	}
}

// hold makes d's core worker id's core in w.
func (w *world) hold(id WorkerID, d *delivery) {
	w.touch(id)
	s := &w.slots[id-1]
	if s.held != d.held {
		w.spare.drop(s.held)
		d.held.refs++
		s.held = d.held
	}
	s.key = d.key
}

// clone is a copy of c, held once, made in a spare core when there is one.
func (sp *spares) clone(c *core.Core) *heldCore {
	if sp != nil {
		if k := len(sp.cores); k > 0 {
			h := sp.cores[k-1]
			sp.cores = sp.cores[:k-1]
			h.core, h.refs, h.counted = c.CloneInto(h.core), 1, false
			return h
		}
	}
	return &heldCore{core: c.Clone(), refs: 1}
}

// world is a world to overwrite with a clone: a spare, or a new one.
func (sp *spares) world() *world {
	if sp != nil {
		if k := len(sp.worlds); k > 0 {
			w := sp.worlds[k-1]
			sp.worlds = sp.worlds[:k-1]
			return w
		}
	}
	return new(world)
}

// Recycle gives w, which the search is done with, to the clones to come,
// with the cores no other world holds (explore.Recycler). The tables in
// a core may still be shared with other cores, and stay untouched.
func (w *world) Recycle() {
	if w.spare == nil {
		return
	}
	for i := range w.slots {
		w.spare.drop(w.slots[i].held)
	}
	w.spare.worlds = append(w.spare.worlds, w)
}

// Clone returns an independent copy.
func (w *world) Clone() *world {
	n := w.spare.world()
	*n = *w
	// Copy on write: a step changes one core or two, so the clone shares
	// them all and copies each only when it first changes it (core).
	n.slots = inline(n.slotRoom[:], w.slots)
	for i := range w.slots {
		w.slots[i].held.refs++
	}
	n.inflight = inline(n.inflightRoom[:], w.inflight)
	n.facts = inline(n.factRoom[:], w.facts)
	// The program's state and the monitor are shared the same way.
	n.pOwned, w.pOwned = false, false
	n.monOwned, w.monOwned = false, false
	n.eager = nil // empty between steps; made when a step needs it
	return n
}

// inline copies s into room when it fits (room is the clone's own, copied
// with it), onto the heap when not.
func inline[T any](room, s []T) []T {
	if len(s) > len(room) {
		return slices.Clone(s)
	}
	return room[:copy(room, s):len(room)]
}
