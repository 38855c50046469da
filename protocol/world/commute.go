package world

import (
	"hash/maphash"

	"github.com/rrefkit/rref/explore"
)

// Sleep sets (explore.Commuter): each step records what it reads and
// writes, so that the search takes steps of different nodes that do not
// touch each other in one order only. What a step touches:
//
//   - the node it runs on, whole (its machine state, handler, timers and
//     record): a delivery, an input or a timer's firing there;
//   - the clock, read by a handler that asks the time, sets a timer or
//     sends under a delivery bound (the deadline is stamped from it), and
//     written by a firing that moves it on;
//   - the timers, as one location: a firing is offered only for the
//     earliest timer of all, so a handler that sets or cancels one may
//     enable or disable another node's firing;
//   - the network, a multiset that sends and deliveries change without
//     conflict (Footprint.Add), read whole by a send into a network with a
//     capacity and by a firing under a delivery bound (a message due
//     earlier holds the clock back);
//   - the packet a delivery, a loss or a duplication takes, so that two
//     of them on one packet conflict;
//   - the network's loss and duplication budgets.
//
// A tick, a crash and a restart touch everything. TestSleepSetsKeepEveryState
// checks the records against the search itself: the same states, with and
// without the sleep sets, over every example's world.

// The tables locations are in.
const (
	tableNode   = iota // a node, by index
	tableClock         // the clock (one location)
	tableTimers        // every node's timers (one location)
	tableNet           // the messages in flight, as a multiset
	tablePacket        // one message in flight, by its contents
	tableBudget        // the loss (0) and duplication (1) budgets
)

// packetSeed keys packets' locations and events: fixed for the process.
var packetSeed = maphash.MakeSeed()

func packetKey(p packet) uint64 {
	var h maphash.Hash
	h.SetSeed(packetSeed)
	var b [24]byte
	put := func(off int, v uint64) {
		for i := range 8 {
			b[off+i] = byte(v >> (8 * i))
		}
	}
	put(0, uint64(p.from))
	put(8, uint64(p.to))
	put(16, uint64(p.deadline))
	h.Write(b[:])
	h.WriteString(p.frame)
	return h.Sum64()
}

// Event implements explore.Commuter: a choice named alike in every state
// it is enabled in. A tick names nothing (it moves every deadline).
func (w *World) Event(c int) (explore.Event, bool) {
	ch := w.choice(c)
	switch ch.kind {
	case deliver, lose, duplicate:
		return explore.Event{uint64(ch.kind), packetKey(w.net[ch.index])}, true
	case input:
		return explore.Event{uint64(ch.kind), uint64(ch.node)<<32 | uint64(ch.event)}, true
	case fire:
		t := w.nodes[ch.node].timers[ch.index]
		return explore.Event{uint64(ch.kind), maphash.String(packetSeed, t.key) ^ uint64(ch.node)<<48 ^ uint64(t.event)<<32 ^ uint64(t.at)}, true
	case crash, restart:
		return explore.Event{uint64(ch.kind), uint64(ch.node)}, true
	}
	return explore.Event{}, false
}

// Footprint implements explore.Commuter: what the last Step touched.
func (w *World) Footprint() *explore.Footprint { return w.fp }

func (w *World) touchNode(i int) { w.fp.Write(explore.Location(tableNode, uint64(i))) }
func (w *World) readClock()      { w.fp.Read(explore.Location(tableClock, 0)) }
func (w *World) writeClock()     { w.fp.Write(explore.Location(tableClock, 0)) }
func (w *World) writeTimers()    { w.fp.Write(explore.Location(tableTimers, 0)) }
func (w *World) takePacket(p packet) {
	w.fp.Write(explore.Location(tablePacket, packetKey(p)))
	w.fp.Add(tableNet)
}
func (w *World) writeBudget(which uint64) { w.fp.Write(explore.Location(tableBudget, which)) }
