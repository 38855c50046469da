package worker

import (
	"sync"
	"time"

	"github.com/rrefkit/rref/runtime/core"
)

// An owner holds back the RemoteRet that confirms a Remote's creator
// (core.WithDeferredAcks), so that its answer to the creator's fetch
// confirms the fork instead: a Remote followed by ToHere costs the owner
// one answer and the creator one message to handle, not two. The core
// lists each RemoteRet it holds back; here a timer sends those still held
// (core.FlushAck) between ackDelay and twice that later: each tick sends
// the acks held since the tick before, so that one held just before a
// tick still has its full delay for the fetch to come. A creator that
// does not fetch is confirmed all the same, a little later: its delete
// waits until then, and a Config.RemoteTimeout must leave room for it.
//
// The shutdown barrier and Settle send held acks at once
// (flushAllDeferred), as they do deferred deletes, and count a flush
// under way as work, so that neither sees a group quiet while a RemoteRet
// is between the list and the core.

// ackDelay is how long a held-back RemoteRet waits at least for the
// creator's fetch: far above the few microseconds between a Remote and
// its ToHere in a program that fetches at once, far below a RemoteTimeout
// worth setting. A variable only so that tests can hold acks back; a
// worker reads it once, when it is made.
var ackDelay = 200 * time.Microsecond

// heldAcks lists the values whose RemoteRet the core holds back, in two
// generations: fresh ones, held since the last tick, and old ones, held
// since the tick before, which the next tick sends.
type heldAcks struct {
	mu       sync.Mutex
	fresh    []core.RRefID
	old      []core.RRefID
	spare    []core.RRefID // a list flushed, to reuse
	armed    bool
	flushing int // flushes between taking their list and the core's answer
	timer    *time.Timer
	delay    time.Duration // ackDelay when the worker was made
}

// holdAcks records RemoteRets the core held back and arms the timer.
func (w *Worker) holdAcks(ids []core.RRefID) {
	a := &w.acks
	a.mu.Lock()
	defer a.mu.Unlock()
	a.fresh = append(a.fresh, ids...)
	w.armAcks()
}

// armAcks starts the timer unless it runs; the caller holds w.acks.mu.
func (w *Worker) armAcks() {
	a := &w.acks
	if a.armed {
		return
	}
	a.armed = true
	if a.timer == nil {
		a.timer = time.AfterFunc(a.delay, w.ackTick)
	} else {
		a.timer.Reset(a.delay)
	}
}

// ackTick sends the old generation and ages the fresh one.
func (w *Worker) ackTick() {
	a := &w.acks
	a.mu.Lock()
	a.armed = false
	due := a.old
	a.old, a.fresh = a.fresh, a.takeSpare()
	if len(a.old) > 0 {
		w.armAcks()
	}
	if len(due) == 0 {
		if a.spare == nil && due != nil {
			a.spare = due[:0]
		}
		a.mu.Unlock()
		return
	}
	a.flushing++
	a.mu.Unlock()
	w.sendAcks(due)
}

// flushAcks sends every RemoteRet still held back, and reports whether any
// was listed or a flush was under way (the caller looks again later).
func (w *Worker) flushAcks() bool {
	a := &w.acks
	a.mu.Lock()
	busy := a.flushing > 0
	due := append(a.old, a.fresh...)
	a.old, a.fresh = nil, a.takeSpare()
	a.flushing++
	a.mu.Unlock()
	w.sendAcks(due)
	return busy || len(due) > 0
}

// takeSpare returns the spare list, emptied; the caller holds a.mu.
func (a *heldAcks) takeSpare() []core.RRefID {
	s := a.spare[:0]
	a.spare = nil
	return s
}

// beforeAckFlush, when set, runs between a flush taking its list and the
// core sending: tests stall a flush there.
var beforeAckFlush func()

// sendAcks has the core send the RemoteRets of ids still held back, then
// ends the flush its caller counted.
func (w *Worker) sendAcks(ids []core.RRefID) {
	if len(ids) > 0 {
		if f := beforeAckFlush; f != nil {
			f()
		}
	}
	if len(ids) > 0 && !w.isClosed() {
		w.apply(func(c *core.Core) {
			for _, id := range ids {
				c.FlushAck(id)
			}
		})
	}
	a := &w.acks
	a.mu.Lock()
	a.flushing--
	if a.spare == nil && ids != nil {
		a.spare = ids[:0]
	}
	a.mu.Unlock()
}
