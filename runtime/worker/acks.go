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
// ackDelay later (core.FlushAck), so a creator that does not fetch is
// confirmed all the same, a little later: its delete waits until then,
// and a RemoteTimeout shorter than ackDelay would be too short for any
// network anyway.
//
// The shutdown barrier and Settle send held acks at once
// (flushAllDeferred), as they do deferred deletes.

// ackDelay is how long a held-back RemoteRet waits for the creator's
// fetch: far above the few microseconds between a Remote and its ToHere
// in a program that fetches at once, far below a RemoteTimeout. A
// variable only so that tests can hold acks back.
var ackDelay = 200 * time.Microsecond

// heldAcks lists the values whose RemoteRet the core holds back.
type heldAcks struct {
	mu    sync.Mutex
	ids   []core.RRefID
	spare []core.RRefID // the list flushed last, to reuse
	armed bool
	timer *time.Timer
}

// holdAcks records RemoteRets the core held back and arms the flush.
func (w *Worker) holdAcks(ids []core.RRefID) {
	a := &w.acks
	a.mu.Lock()
	defer a.mu.Unlock()
	a.ids = append(a.ids, ids...)
	if a.armed {
		return
	}
	a.armed = true
	if a.timer == nil {
		a.timer = time.AfterFunc(ackDelay, func() { w.flushAcks() })
	} else {
		a.timer.Reset(ackDelay)
	}
}

// flushAcks sends the RemoteRets still held back, and reports whether any
// was listed (sent now, or already taken along by a fetch's answer).
func (w *Worker) flushAcks() bool {
	a := &w.acks
	a.mu.Lock()
	ids := a.ids
	a.ids, a.spare = a.spare[:0], nil
	a.armed = false
	a.mu.Unlock()
	if len(ids) == 0 {
		return false
	}
	if !w.closed.Load() {
		w.apply(func(c *core.Core) {
			for _, id := range ids {
				c.FlushAck(id)
			}
		})
	}
	a.mu.Lock()
	if a.spare == nil {
		a.spare = ids[:0]
	}
	a.mu.Unlock()
	return true
}
