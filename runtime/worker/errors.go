package worker

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/rrefkit/rref/generated/rref"
	"github.com/rrefkit/rref/runtime/core"
)

// Errors, matched with errors.Is. A failure that crossed the wire matches
// the same sentinel on the caller as it did where it happened: its kind
// travels with it (core.Failure), as a gRPC status code does.
var (
	ErrUnknownWorker   = errors.New("worker: unknown worker")
	ErrUnknownFunction = errors.New("worker: unknown function")
	ErrPeerFailed      = errors.New("worker: peer failed")
	ErrOwnerFailed     = errors.New("worker: owner failed")
	ErrTimeout         = errors.New("worker: remote timed out")
	ErrDeleted         = errors.New("worker: RRef already released")
	ErrLost            = errors.New("worker: RRef lost (its value was freed or never created)")
	ErrClosed          = errors.New("worker: closed")
	ErrLeak            = errors.New("worker: references still held at shutdown")
)

// UserError is a registered function's own error, carried back to its
// caller (or stored on the value of a Remote and returned by every ToHere).
// It names the function and the worker it ran on once; it matches, with
// errors.Is, the caller's Config.Errors entry of its Code.
type UserError struct {
	Function string // empty for an RRef this worker did not create: it does not know the function
	Worker   string // where the function ran
	Code     string // the Config.Errors entry the error matched there (its Error() text), or empty
	Message  string // the function's error text
	err      error  // the caller's entry of Code, if it has one
}

func (e *UserError) Error() string {
	fn := "the function"
	if e.Function != "" {
		fn = "function " + e.Function
	}
	return fmt.Sprintf("worker: %s on %s failed: %s", fn, e.Worker, e.Message)
}

// Unwrap is the caller's registered error of the same code, if any.
func (e *UserError) Unwrap() error { return e.err }

// localFailure is a failure of this worker's own making in running a
// call (no such function, the wrong types, arguments it could not decode
// or a result it could not encode), as opposed to the function's error:
// only these cross the wire as their own kinds. A function that returns
// an unknown-function error from a call of its own fails as itself, a
// user error naming the inner call, and does not make its caller believe
// that the function it called does not exist.
type localFailure struct {
	kind rref.ErrorKind
	err  error
}

func (f *localFailure) Error() string { return f.err.Error() }
func (f *localFailure) Unwrap() error { return f.err }

// failureOf is how a function's error crosses the wire: this worker's own
// failures and the context's errors by kind, the rest as user errors with
// the code of the registered error they match.
func (w *Worker) failureOf(err error) core.Failure {
	if err == nil {
		return core.Failure{}
	}
	msg := err.Error()
	if lf := (*localFailure)(nil); errors.As(err, &lf) {
		switch lf.kind {
		case rref.ErrorKindUnknownFunction:
			return core.Failure{Kind: lf.kind} // the caller names it
		case rref.ErrorKindCodec:
			return core.Failure{Kind: lf.kind, Message: strings.TrimPrefix(msg, ErrCodec.Error()+": ")}
		}
		return core.Failure{Kind: lf.kind, Message: msg}
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return core.Failure{Kind: rref.ErrorKindDeadlineExceeded, Message: msg}
	case errors.Is(err, context.Canceled):
		return core.Failure{Kind: rref.ErrorKindCancelled, Message: msg}
	}
	f := core.Failure{Kind: rref.ErrorKindUser, Message: msg}
	for _, known := range w.cfg.Errors {
		if known != nil && errors.Is(err, known) {
			f.Code = known.Error()
			break
		}
	}
	return f
}

// registeredError is the caller's Config.Errors entry of code, or nil.
func (w *Worker) registeredError(code string) error {
	if code == "" {
		return nil
	}
	for _, known := range w.cfg.Errors {
		if known != nil && known.Error() == code {
			return known
		}
	}
	return nil
}

// remoteError is a failure that came back from function fn (empty when
// not known) on worker where, as the package's error: the sentinel of its
// kind, or a *UserError.
func (w *Worker) remoteError(kind rref.ErrorKind, code, msg, fn, where string) error {
	if kind == rref.ErrorKindNone {
		return nil // before anything is built: the path of every call that succeeds
	}
	switch kind {
	case rref.ErrorKindDeadlineExceeded:
		msg = withoutCause(msg, context.DeadlineExceeded)
	case rref.ErrorKindCancelled:
		msg = withoutCause(msg, context.Canceled)
	}
	what := fn + " on " + where
	if fn == "" {
		what = "the function on " + where
	}
	if msg != "" && kind != rref.ErrorKindUnknownFunction {
		what += ": " + msg
	}
	switch kind {
	case rref.ErrorKindUnknownFunction:
		return fmt.Errorf("%w: %s", ErrUnknownFunction, what)
	case rref.ErrorKindCodec:
		return fmt.Errorf("%w: %s", ErrCodec, what)
	case rref.ErrorKindDeadlineExceeded:
		return fmt.Errorf("worker: %s: %w", what, context.DeadlineExceeded)
	case rref.ErrorKindCancelled:
		return fmt.Errorf("worker: %s: %w", what, context.Canceled)
	case rref.ErrorKindTimeout:
		return fmt.Errorf("%w: %s", ErrTimeout, what)
	case rref.ErrorKindOwnerFailed:
		return fmt.Errorf("%w: %s", ErrPeerFailed, what)
	case rref.ErrorKindLost:
		return fmt.Errorf("%w: %s", ErrLost, what)
	case rref.ErrorKindTooLarge:
		return fmt.Errorf("%w: %s", ErrTooLarge, what)
	case rref.ErrorKindUser:
		return &UserError{Function: fn, Worker: where, Code: code, Message: msg, err: w.registeredError(code)}
	}
	return fmt.Errorf("worker: %s failed: %s", what, kind)
}

// withoutCause is a failure's message without the text of cause at its
// end, where a function that returns ctx.Err(), wraps it (%w) or joins it
// puts it: the caller's error wraps cause itself, and says it once.
func withoutCause(msg string, cause error) string {
	c := cause.Error()
	if msg == c {
		return ""
	}
	for _, sep := range []string{": ", "\n"} {
		if m, ok := strings.CutSuffix(msg, sep+c); ok {
			return m
		}
	}
	return msg
}

// callError is a call's failure; callerTypes describes the caller's side,
// for a type mismatch (computed only then).
func (w *Worker) callError(res core.CallResult, fn string, to core.WorkerID, callerTypes func() string) error {
	if res.Err == rref.ErrorKindTypeMismatch {
		return fmt.Errorf("%w; the caller's %s", mismatch(res.Message), callerTypes())
	}
	return w.remoteError(res.Err, res.Code, res.Message, fn, w.nameOf(to))
}

// fetchError is a fetch's failure: the stored error of the function that
// made the value (fn, when this worker knows it), or why there is no value.
func (w *Worker) fetchError(fr core.FetchResult, fn string, owner core.WorkerID) error {
	switch fr.Err {
	case rref.ErrorKindNone:
		return nil
	case rref.ErrorKindTimeout:
		return ErrTimeout // this worker's record of its Remote, not confirmed in time
	case rref.ErrorKindDeleted:
		return ErrDeleted
	case rref.ErrorKindOwnerFailed:
		// Named, so that whoever reads it (a log, a caller further up a
		// chain, the soak's check of what a death may fail) knows which
		// member's death lost the value.
		return fmt.Errorf("%w: %s", ErrOwnerFailed, w.nameOf(owner))
	case rref.ErrorKindLost:
		return ErrLost
	case rref.ErrorKindTypeMismatch:
		return mismatch(fr.Message)
	case rref.ErrorKindTooLarge:
		// The value exists and its function, if any, succeeded: only its
		// way here failed.
		return fmt.Errorf("%w: fetch from %s: %s", ErrTooLarge, w.nameOf(owner), fr.Message)
	}
	return w.remoteError(fr.Err, fr.Code, fr.Message, fn, w.nameOf(owner))
}

// mismatch is a callee's type-mismatch message (which names the function,
// the worker and its types) as ErrTypeMismatch, its prefix not repeated.
func mismatch(msg string) error {
	return fmt.Errorf("%w: %s", ErrTypeMismatch, strings.TrimPrefix(msg, ErrTypeMismatch.Error()+": "))
}
