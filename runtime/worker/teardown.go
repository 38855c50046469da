package worker

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/rrefkit/rref/runtime/core"
)

// goroutines tracks the worker's own goroutines (receivers, drainers, the
// sweeper, the watchdog), which Close waits for. User functions are not
// among them: a function that blocks, or never returns, must not keep Close
// from returning. A receiver running a function inline leaves the set for
// as long as the function runs, and comes back only if the worker is not
// closing meanwhile.
type goroutines struct {
	mu      sync.Mutex
	n       int
	closing bool
	gone    chan struct{} // closed once closing and n is 0
}

func newGoroutines() *goroutines { return &goroutines{gone: make(chan struct{})} }

// add counts a goroutine about to start, or one coming back; it reports
// false, counting nothing, once Close has begun.
func (g *goroutines) add() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closing {
		return false
	}
	g.n++
	return true
}

func (g *goroutines) done() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.n--; g.n == 0 && g.closing {
		close(g.gone)
	}
}

// wait stops new goroutines and waits for the counted ones to leave.
func (g *goroutines) wait() {
	g.mu.Lock()
	if !g.closing {
		g.closing = true
		if g.n == 0 {
			close(g.gone)
		}
	}
	g.mu.Unlock()
	<-g.gone
}

// go starts f as one of the worker's goroutines, unless Close has begun.
func (g *goroutines) start(f func()) bool {
	if !g.add() {
		return false
	}
	go func() {
		defer g.done()
		f()
	}()
	return true
}

// errGoexit is the error a call gets whose function called runtime.Goexit
// (as t.FailNow does): its goroutine ended without returning.
var errGoexit = errors.New("worker: the function called runtime.Goexit")

// callUser runs a registered function with panics and runtime.Goexit
// contained: a panic becomes the call's error; a Goexit cannot be stopped,
// so the call is answered from the unwinding goroutine, and a receiver it
// ran on is replaced, so its connection is not left without a reader.
func (w *Worker) callUser(ctx context.Context, h handler, run core.Run, dst []byte) (res []byte, refs []core.HandleID, err error) {
	returned := false
	defer func() {
		if returned {
			return
		}
		if p := recover(); p != nil {
			err = fmt.Errorf("panic: %v", p)
			return
		}
		w.cfg.Logger.Warn("rref function called runtime.Goexit", "worker", w.name, "function", run.Fn)
		if r, ok := ctx.Value(receiverKey{}).(*receiver); ok && r.replaced.CompareAndSwap(false, true) {
			w.startReceiver(r.from, r.conn)
		}
		cc, _ := ctx.(*callCtx)
		w.answer(run, cc, nil, nil, nil, fmt.Errorf("%w: %s", errGoexit, run.Fn))
	}()
	res, refs, err = h(ctx, w, run.Args, run.Handles, dst)
	returned = true
	return res, refs, err
}
