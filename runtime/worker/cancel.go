package worker

import (
	"context"
	"math"
	"sync"
	"time"

	"github.com/rrefkit/rref/runtime/core"
)

// A call's context on the callee ends when its caller's deadline passes
// (the call carries the time left, core.Run.Timeout), when the caller
// stops waiting (its context cancelled: a CallCancel, core.Cancel), when
// the worker closes, and when the function has returned.
//
// A cancel can arrive before the function's goroutine runs, so the
// context of a call is made under the worker's lock as the core hands the
// run out (trackCalls), in the order the core saw the call and its cancel.
//
// The context is the package's own (callCtx), not context.WithCancel and
// WithTimeout: those cost a dozen allocations a call (a timer, a child
// registered with the parent), most of which a function that never waits
// on ctx.Done() does not need. A callCtx is one allocation; its channel,
// its timer and its link to the parent are made by the first Done.

// ctxSlab hands out call contexts from arrays of ctxSlabSize. A context
// is never reused: a function may keep its context after it returns, and
// must find it ended, not serving a later call, so contexts cannot be
// pooled. Made in arrays, a call costs a fraction of an allocation; an
// array is freed once none of its contexts is reachable, so a context
// kept for long keeps its array's few kilobytes.
type ctxSlab struct {
	free []callCtx
}

// ctxSlabSize contexts (about 120 bytes each) are made at once.
const ctxSlabSize = 32

// next is a new context (w.mu).
func (s *ctxSlab) next() *callCtx {
	if len(s.free) == 0 {
		s.free = make([]callCtx, ctxSlabSize)
	}
	c := &s.free[0]
	s.free = s.free[1:]
	return c
}

// monoEpoch is the origin of call contexts' deadlines (callCtx.due).
var monoEpoch = time.Now()

// dueAfter is the due time of a deadline timeout after now (both since
// monoEpoch), saturating: a caller whose deadline is centuries away
// (time.Until saturates at the largest Duration), or a peer that says so,
// must not wrap to the past.
func dueAfter(now, timeout time.Duration) time.Duration {
	if timeout > math.MaxInt64-now {
		return math.MaxInt64
	}
	return now + timeout
}

// callKey names a call a peer made: its worker and its call id. The
// worker is widened to 64 bits so that the key is 16 bytes with no padding,
// which the map hashes in one pass: a call looks its key up three times.
type callKey struct {
	from uint64
	id   uint64
}

func keyOf(from core.WorkerID, id uint64) callKey { return callKey{uint64(from), id} }

// callCtx is the context a called function runs in.
type callCtx struct {
	mu     sync.Mutex
	parent context.Context // the worker's or its receiver's; set before the function runs
	// due is the caller's deadline, as the time it had left when it sent
	// the call, on the monotonic clock since monoEpoch; 0: none. Kept as a
	// duration so that a check reads the clock once (time.Since), where
	// time.Now reads the wall clock too.
	due     time.Duration
	err     error         // why it ended: set once
	done    chan struct{} // made by the first Done
	timer   *time.Timer   // closes done at the deadline, once Done was asked for
	unlink  func() bool   // stops watching the parent, once Done was asked for
	claimed bool          // a function runs in it (w.mu)
	// next is the context of a later call with the same key (w.mu): a
	// peer that repeats a call id. Chained in the context itself so that
	// the usual key, with one call, costs the map no slice of its own.
	next *callCtx
	// run says what runs in it, for a shutdown that gives up to name
	// (set once, under w.mu, before a function can see the context).
	run running
}

// running is a function this worker was handed to run: its wire name,
// its caller, and since when (on the monotonic clock since monoEpoch).
// Calls keep it in their contexts, Remotes in Worker.remotes: no
// allocation of its own on a call's path.
type running struct {
	fn    string
	from  core.WorkerID
	since time.Duration
}

func (c *callCtx) Deadline() (time.Time, bool) {
	pd, pok := c.parent.Deadline()
	if c.due == 0 {
		return pd, pok
	}
	// From the wall clock now, not monoEpoch's: the wall clock may have
	// been set since the process began.
	if deadline := time.Now().Add(c.due - time.Since(monoEpoch)); !pok || !pd.Before(deadline) {
		return deadline, true
	}
	return pd, pok
}

func (c *callCtx) Value(key any) any { return c.parent.Value(key) }

func (c *callCtx) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.errLocked()
}

// errLocked is Err, ending the context first if its deadline or its
// parent has: until Done is asked for, nothing watches them.
func (c *callCtx) errLocked() error {
	if c.err == nil {
		if c.due != 0 && time.Since(monoEpoch) >= c.due {
			c.finish(context.DeadlineExceeded)
		} else if c.parent != nil && c.parent.Err() != nil {
			c.finish(c.parent.Err())
		}
	}
	return c.err
}

func (c *callCtx) Done() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done != nil {
		return c.done
	}
	err := c.errLocked()
	c.done = make(chan struct{})
	if err != nil {
		close(c.done)
		return c.done
	}
	if c.due != 0 {
		c.timer = time.AfterFunc(c.due-time.Since(monoEpoch), func() { c.end(context.DeadlineExceeded) })
	}
	c.unlink = context.AfterFunc(c.parent, func() { c.end(c.parent.Err()) })
	return c.done
}

// end ends the context with err, unless it has ended.
func (c *callCtx) end(err error) {
	c.mu.Lock()
	if c.err == nil {
		c.finish(err)
	}
	c.mu.Unlock()
}

// finish ends the context; c.mu is held.
func (c *callCtx) finish(err error) {
	c.err = err
	if c.done != nil {
		close(c.done)
	}
	if c.timer != nil {
		c.timer.Stop()
	}
	if c.unlink != nil {
		c.unlink()
	}
}

// trackCalls makes the contexts of the calls the core hands out in rd and
// ends those whose callers gave up (and forgets the notes of values freed).
// Called with w.mu held, right after the core's outputs are taken. A peer
// that repeats a call id gets a context for each run: the key names them
// all, and a cancel ends them all.
func (w *Worker) trackCalls(rd *core.Ready) {
	for _, run := range rd.Runs {
		now := time.Since(monoEpoch)
		if run.Kind != core.RunCall {
			w.remotes[run.RRef] = running{fn: run.Fn, from: run.From, since: now}
			continue
		}
		c := w.ctxSlab.next()
		c.run = running{fn: run.Fn, from: run.From, since: now}
		if run.Timeout > 0 {
			c.due = dueAfter(now, run.Timeout)
		}
		if run.Cancelled {
			c.err = cancelCause(run.PastDeadline)
		}
		key := keyOf(run.From, run.CallID)
		if first := w.calling[key]; first == nil {
			w.calling[key] = c
		} else {
			last := first
			for last.next != nil {
				last = last.next
			}
			last.next = c
		}
	}
	for _, f := range rd.Freed {
		delete(w.values, f.RRef)
	}
	for _, cancel := range rd.Cancels {
		// A peer names only its own calls: the key holds its id.
		for c := w.calling[keyOf(cancel.From, cancel.CallID)]; c != nil; c = c.next {
			c.end(cancelCause(cancel.Deadline))
		}
	}
}

// cancelCause is why a call's context ends when its caller stops waiting:
// past the caller's deadline, or cancelled. The callee's own timer would
// say DeadlineExceeded a moment later; a cancel that said Canceled instead
// would have the function believe someone changed their mind.
func cancelCause(pastDeadline bool) error {
	if pastDeadline {
		return context.DeadlineExceeded
	}
	return context.Canceled
}

// callContext is the context run's function runs in, under parent: the
// first of its key's contexts no function has claimed yet.
func (w *Worker) callContext(parent context.Context, run core.Run) *callCtx {
	w.mu.Lock()
	var c *callCtx
	for x := w.calling[keyOf(run.From, run.CallID)]; x != nil; x = x.next {
		if !x.claimed {
			c = x
			break
		}
	}
	if c == nil { // unreachable: trackCalls saw the run first
		c = &callCtx{}
	}
	c.claimed = true
	w.mu.Unlock()
	// No lock: parent is read only by the function (Value, Deadline, Err,
	// Done), which gets the context after this; a cancel does not read it.
	c.parent = parent
	return c
}

// endCall forgets the context c of a call answered, and ends it. Called
// with w.mu held.
func (w *Worker) endCall(run core.Run, c *callCtx) {
	key := keyOf(run.From, run.CallID)
	if first := w.calling[key]; first == c && c != nil {
		if c.next == nil {
			delete(w.calling, key)
		} else {
			w.calling[key] = c.next
		}
	} else {
		for x := first; x != nil; x = x.next {
			if x.next == c && c != nil {
				x.next = c.next
				break
			}
		}
	}
	if c != nil {
		c.end(context.Canceled)
	}
}
