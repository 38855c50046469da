package worker

import (
	"time"

	"github.com/rrefkit/rref/generated/rref"
	"github.com/rrefkit/rref/runtime/core"
)

// Over a connection that batches writes (tcp: fifo.Conn.Corks), a
// UserDelete waits briefly before it leaves, so that it rides with the
// next frame to its owner instead of costing a write and a wake-up of its
// own: a program that releases an RRef and then calls the owner again (a
// Remote, ToHere, Release loop) sends both in one write, and the owner's
// receiver reads both at once. Nothing waits for a delete (it only lets
// the owner free the value), and frames to a peer still leave in the order
// they were made: a deferred delete goes before the frame that takes it
// along, or alone after deleteDelay.
//
// Over shared memory and mem a receiver spins between messages, so a
// delete costs no wake-up; there, deferring it only moved the owner's
// handling of it onto the path of the next call (Remote + ToHere +
// Release over mem went from 5.3-6.8 to 7.4-7.7 us, interleaved A/B,
// where over tcp it went from 48.3-48.6 to 41.5-43.6 us).
//
// The shutdown barrier and Settle count deferred deletes as queued, so a
// group is never settled while one waits, and send them at once when they
// find one (flushAllDeferred), so that neither waits for deleteDelay.

// deleteDelay is how long a UserDelete waits for a frame to ride with:
// far above the few microseconds between a Release and a program's next
// message to the same owner, far below anything a person notices. A
// variable only so that tests can hold deletes back.
var deleteDelay = 200 * time.Microsecond

// deferrable reports whether m may wait for a frame to ride with.
func deferrable(m core.Envelope) bool {
	_, ok := m.Msg.(*rref.UserDelete)
	return ok
}

// deferLocked queues a delete's frame (in buf) for peer to; the caller
// holds ob.mu. The first one arms the flush.
func (w *Worker) deferLocked(ob *outbox, to core.WorkerID, buf *[]byte) {
	ob.lazy = append(ob.lazy, buf)
	if ob.lazyArmed {
		return
	}
	ob.lazyArmed = true
	if ob.lazyTimer == nil {
		ob.lazyTimer = time.AfterFunc(deleteDelay, func() { w.flushDeferred(to) })
	} else {
		ob.lazyTimer.Reset(deleteDelay)
	}
}

// flushDeferred sends the deletes still waiting for peer to.
func (w *Worker) flushDeferred(to core.WorkerID) {
	if w.isClosed() {
		return
	}
	ob := w.outboxes[to-1]
	ob.mu.Lock()
	ob.lazyArmed = false
	if len(ob.lazy) == 0 {
		ob.mu.Unlock()
		return
	}
	w.sendLocked(ob, to, nil) // unlocks
}

// flushAllDeferred sends every delete still waiting and every RemoteRet
// held back (acks.go), and reports whether there was one.
func (w *Worker) flushAllDeferred() bool {
	found := w.flushAcks()
	for i, ob := range w.outboxes {
		if ob == nil {
			continue
		}
		ob.mu.Lock()
		waiting := len(ob.lazy) > 0
		ob.mu.Unlock()
		if waiting {
			found = true
			w.flushDeferred(core.WorkerID(i + 1))
		}
	}
	return found
}
