package worker

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"runtime/debug"
	"strings"
	"sync/atomic"

	"github.com/rrefkit/rref/runtime/core"
)

// goroutines tracks the worker's own goroutines (receivers, drainers, the
// sweeper, the watchdog), which Close waits for. User functions are not
// among them: a function that blocks, or never returns, must not keep Close
// from returning. A receiver running a function inline leaves the set for
// as long as the function runs, and comes back only if the worker is not
// closing meanwhile.
type goroutines struct {
	// state is the count of goroutines in the set, with closingBit set once
	// Close has begun. One atomic word, not a mutex: a receiver running a
	// function inline leaves and rejoins the set on every call.
	state atomic.Int64
	gone  chan struct{} // closed once closing and the count is 0
}

// closingBit marks the set closed to newcomers. Counts stay far below it.
const closingBit = 1 << 62

func newGoroutines() *goroutines { return &goroutines{gone: make(chan struct{})} }

// add counts a goroutine about to start, or one coming back; it reports
// false, counting nothing, once Close has begun.
func (g *goroutines) add() bool {
	for {
		s := g.state.Load()
		if s&closingBit != 0 {
			return false
		}
		if g.state.CompareAndSwap(s, s+1) {
			return true
		}
	}
}

// done uncounts a goroutine. Once closing, counts only fall (add refuses),
// so exactly one event sees the set closing and empty: this decrement, or
// wait finding it empty.
func (g *goroutines) done() {
	if g.state.Add(-1) == closingBit {
		close(g.gone)
	}
}

// wait stops new goroutines and waits for the counted ones to leave.
func (g *goroutines) wait() {
	for {
		s := g.state.Load()
		if s&closingBit != 0 {
			break // an earlier wait closed it
		}
		if g.state.CompareAndSwap(s, s|closingBit) {
			if s == 0 {
				close(g.gone)
			}
			break
		}
	}
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

// panicFramesCarried is how many frames of a panicking function's stack
// its caller's error carries, from where it panicked: enough to find the
// line and the few calls that led to it. The whole stack goes to the
// callee's log.
const panicFramesCarried = 6

// handlerFrame starts the frame of the handler Register makes, which calls
// the function: the stack's frames from there on are this package's.
var handlerFrame = reflect.TypeFor[Worker]().PkgPath() + ".Register["

// panicFrames is the part of a stack (debug.Stack, taken in a deferred
// recover) that says where the function panicked: the frames below the
// panic, past the runtime's own (a nil dereference passes sigpanic), up to
// n of them, and none from Register's handler on, which called the
// function.
func panicFrames(stack []byte, n int) string {
	lines := strings.Split(strings.TrimSpace(string(stack)), "\n")
	// lines[0] is "goroutine N [running]:"; then a function line and its
	// "\tfile:line +0x.." line per frame.
	start := 1
	for i := 1; i+1 < len(lines); i += 2 {
		if strings.HasPrefix(lines[i], "panic(") {
			start = i + 2
		}
	}
	var b strings.Builder
	for i, kept := start, 0; i+1 < len(lines) && kept < n; i += 2 {
		fn := lines[i]
		if kept == 0 && strings.HasPrefix(fn, "runtime.") {
			continue
		}
		if strings.HasPrefix(fn, handlerFrame) {
			break // the handler that called the function: no more of the user's code
		}
		if kept > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(fn + "\n" + lines[i+1])
		kept++
	}
	return b.String()
}

// callUser runs a registered function with panics and runtime.Goexit
// contained: a panic becomes the call's error; a Goexit cannot be stopped,
// so the call is answered from the unwinding goroutine, and a receiver it
// ran on is replaced, so its connection is not left without a reader. cc
// is a call's context (nil for a Remote).
func (w *Worker) callUser(ctx context.Context, cc *callCtx, h handler, run core.Run, dst []byte) (res []byte, refs []core.HandleID, err error) {
	returned := false
	defer w.contained(ctx, cc, run, &returned, &err)
	res, refs, err = h(ctx, w, run.Args, run.Handles, dst)
	returned = true
	return res, refs, err
}

// contained is deferred by the outermost frame that runs a peer's call in
// user code (the function, or the server interceptors around it), which
// sets *returned as it returns: a panic becomes *err, and a runtime.Goexit
// answers the call (see callUser).
func (w *Worker) contained(ctx context.Context, cc *callCtx, run core.Run, returned *bool, err *error) {
	if *returned {
		return
	}
	if p := recover(); p != nil {
		*err = w.panicked(run, p)
		return
	}
	w.cfg.Logger.Warn("rref function called runtime.Goexit", "worker", w.name, "function", run.Fn)
	if r, ok := ctx.Value(receiverKey{}).(*receiver); ok && r.replaced.CompareAndSwap(false, true) {
		w.startReceiver(r.from, r.conn)
	}
	w.answer(run, cc, nil, nil, nil, fmt.Errorf("%w: %s", errGoexit, run.Fn))
}

// panicked is the error of a call whose code panicked with p (called in
// the deferred recover): the panic and where it happened, the whole stack
// going to the log.
func (w *Worker) panicked(run core.Run, p any) error {
	stack := debug.Stack()
	w.cfg.Logger.Error("rref function panicked", "worker", w.name, "function", run.Fn, "caller", w.nameOf(run.From),
		"panic", fmt.Sprint(p), "stack", string(stack))
	return fmt.Errorf("panic: %v\n%s", p, panicFrames(stack, panicFramesCarried))
}
