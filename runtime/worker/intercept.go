package worker

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"sync"

	"github.com/rrefkit/rref/generated/rref"
	"github.com/rrefkit/rref/runtime/core"
)

// Interceptors are the worker's one hook for observing and policing calls,
// shaped as gRPC's unary interceptors: each is handed the call's
// description and the rest of the chain, runs code before and after it,
// and may fail the call instead of (or after) running it. The package
// itself imports no metrics or tracing library; runtime/observe builds
// Prometheus metrics and OpenTelemetry tracing on these.
//
// Metadata travels with a call beside its argument (the wire's
// Call.metadata and RemoteCall.metadata), as gRPC's headers do: a caller,
// or a client interceptor, adds it to the context it calls with
// (WithOutgoingMetadata), and the callee's function and server
// interceptors read it from theirs (IncomingMetadata).

// CallKind says what a call is.
type CallKind uint8

const (
	// CallKindCall is a Call or a Go: a function run for its result.
	CallKindCall CallKind = iota + 1
	// CallKindRemote is a Remote: a function run to make a value on its
	// owner. The caller's side covers sending it (Remote returns at once);
	// the owner's side covers the function's run.
	CallKindRemote
	// CallKindFetch is a ToHere or Fetch of an RRef's value from its owner.
	// It runs no function on the owner, whose protocol core answers it from
	// the stored value: it is seen by client interceptors only.
	CallKindFetch
)

func (k CallKind) String() string {
	switch k {
	case CallKindCall:
		return "call"
	case CallKindRemote:
		return "remote"
	case CallKindFetch:
		return "fetch"
	}
	return fmt.Sprintf("CallKind(%d)", uint8(k))
}

// CallInfo describes a call to its interceptors.
type CallInfo struct {
	Kind CallKind
	// Function is the registered name of the function called. For a fetch
	// it is the function that made the value when this worker made the
	// Remote, and empty otherwise (an RRef that was passed on does not say).
	Function string
	// Worker is this worker's name, and Peer the other member's: the
	// callee or the value's owner on the caller's side, the caller on the
	// callee's.
	Worker, Peer string
}

// ServerHandler runs the rest of a callee's chain and the function itself;
// its error is the function's (or why it could not run: no such function,
// the wrong types, arguments that did not decode).
type ServerHandler func(ctx context.Context) error

// ServerInterceptor runs on the callee around each function a peer's Call,
// Go or Remote runs. It calls handler to go on, with ctx or a context
// derived from it; the error it returns is the call's outcome, which crosses
// the wire to the caller as a function's error does (an error listed in
// Config.Errors keeps its identity). Returning nil without calling handler,
// or after handler failed, fails the call with ErrNotRun: an interceptor
// cannot make up a result.
type ServerInterceptor func(ctx context.Context, info CallInfo, handler ServerHandler) error

// Invoker runs the rest of a caller's chain and the call itself.
type Invoker func(ctx context.Context) error

// ClientInterceptor runs on the caller around each Call, Go, Remote, ToHere
// and Fetch. It calls invoker to go on, with ctx or a context derived from
// it (WithOutgoingMetadata adds metadata to the call); its error is what
// the caller gets. Returning nil without calling invoker fails the call
// with ErrNotRun. For Go and Fetch, which return at once, the chain runs on
// the future's goroutine, and Go or Fetch returns once invoker has sent
// the call (or the chain has ended without).
type ClientInterceptor func(ctx context.Context, info CallInfo, invoker Invoker) error

// ErrNotRun: an interceptor returned no error without running the call,
// or swallowed its error; the call has no result to give.
var ErrNotRun = errors.New("worker: an interceptor ended the call without running it, and without an error")

// ErrMetadataTooLarge: a call's metadata is over maxMetadataEntries entries
// or maxMetadataBytes bytes.
var ErrMetadataTooLarge = errors.New("worker: call metadata too large")

// Metadata bounds, W3C Baggage's: 64 entries and 8192 bytes of keys and
// values. Metadata carries context (a trace, a tenant), not data: the
// bound keeps it from becoming an argument that escapes the argument's
// checks, while any propagator's headers fit in it.
const (
	maxMetadataEntries = 64
	maxMetadataBytes   = 8192
)

// Metadata is a call's keys and values, travelling beside its argument.
type Metadata map[string]string

type (
	outgoingKey struct{}
	incomingKey struct{}
)

// WithOutgoingMetadata returns ctx carrying md's entries for the calls made
// with it (Call, Go, Remote), over those it carried already (md's win on a
// key in both). Neither md nor ctx's metadata is changed.
func WithOutgoingMetadata(ctx context.Context, md Metadata) context.Context {
	merged := maps.Clone(OutgoingMetadata(ctx))
	if merged == nil {
		merged = make(Metadata, len(md))
	}
	maps.Copy(merged, md)
	return context.WithValue(ctx, outgoingKey{}, merged)
}

// OutgoingMetadata is the metadata calls made with ctx send (nil: none). It
// is ctx's: copy it to change it.
func OutgoingMetadata(ctx context.Context) Metadata {
	md, _ := ctx.Value(outgoingKey{}).(Metadata)
	return md
}

// IncomingMetadata is the metadata the call a function runs for carried
// (nil: none), in the function's context and its server interceptors'. A
// call the function makes in turn does not send it on by itself.
func IncomingMetadata(ctx context.Context) Metadata {
	md, _ := ctx.Value(incomingKey{}).(Metadata)
	return md
}

// outgoingEntries is ctx's outgoing metadata as the wire carries it,
// sorted by key (so equal metadata makes equal frames), or nil when none.
func outgoingEntries(ctx context.Context, fn, to string) ([]rref.MetaEntry, error) {
	md := OutgoingMetadata(ctx)
	if len(md) == 0 {
		return nil, nil
	}
	size := 0
	for k, v := range md {
		size += len(k) + len(v)
	}
	if len(md) > maxMetadataEntries || size > maxMetadataBytes {
		name, _, _ := splitWireName(fn)
		return nil, fmt.Errorf("%w: %d entries, %d bytes, for %s on %s; limit %d entries, %d bytes",
			ErrMetadataTooLarge, len(md), size, name, to, maxMetadataEntries, maxMetadataBytes)
	}
	out := make([]rref.MetaEntry, 0, len(md))
	for _, k := range slices.Sorted(maps.Keys(md)) {
		out = append(out, rref.MetaEntry{Key: k, Value: []byte(md[k])})
	}
	return out, nil
}

// withIncoming is ctx carrying a run's metadata, copied out of the frame
// it came in (a repeated key: the last wins); ctx itself when it has none.
func withIncoming(ctx context.Context, meta []rref.MetaEntry) context.Context {
	if len(meta) == 0 {
		return ctx
	}
	md := make(Metadata, len(meta))
	for _, e := range meta {
		md[e.Key] = string(e.Value)
	}
	return context.WithValue(ctx, incomingKey{}, md)
}

// interceptors are a worker's chains, built once from its Config; nil when
// it has none, which every call checks first.
type interceptors struct {
	server []ServerInterceptor
	client []ClientInterceptor
}

// checkInterceptors refuses a Config whose interceptor lists hold a nil
// one (a variable left unset), which would fail every call.
func checkInterceptors(cfg Config) error {
	if i := slices.IndexFunc(cfg.ServerInterceptors, func(f ServerInterceptor) bool { return f == nil }); i >= 0 {
		return fmt.Errorf("worker: Config.ServerInterceptors[%d] is nil", i)
	}
	if i := slices.IndexFunc(cfg.ClientInterceptors, func(f ClientInterceptor) bool { return f == nil }); i >= 0 {
		return fmt.Errorf("worker: Config.ClientInterceptors[%d] is nil", i)
	}
	return nil
}

// serverChain runs the server interceptors from the i-th on around h.
func (ic *interceptors) serverChain(ctx context.Context, i int, info CallInfo, h ServerHandler) error {
	if i == len(ic.server) {
		return h(ctx)
	}
	return ic.server[i](ctx, info, func(ctx context.Context) error { return ic.serverChain(ctx, i+1, info, h) })
}

// clientChain runs the client interceptors from the i-th on around inv.
func (ic *interceptors) clientChain(ctx context.Context, i int, info CallInfo, inv Invoker) error {
	if i == len(ic.client) {
		return inv(ctx)
	}
	return ic.client[i](ctx, info, func(ctx context.Context) error { return ic.clientChain(ctx, i+1, info, inv) })
}

// intercept runs the client chain around inv. ran says whether inv
// returned nil: a chain that ends with nil otherwise fails with ErrNotRun.
func (w *Worker) intercept(ctx context.Context, info CallInfo, inv Invoker) error {
	ran := false
	err := w.icept.clientChain(ctx, 0, info, func(ctx context.Context) error {
		err := inv(ctx)
		ran = err == nil
		return err
	})
	if err == nil && !ran {
		return fmt.Errorf("%w: %s %s on %s", ErrNotRun, info.Kind, info.Function, info.Peer)
	}
	return err
}

// interceptAsync runs the client chain around start and wait on a goroutine,
// for Go and Fetch: start sends the call, wait waits for its outcome. It
// returns once start has run (the call has left, its RRef arguments
// forked, as Go promises) or the chain ended without running it; done is
// called with the chain's outcome when it ends.
func (w *Worker) interceptAsync(ctx context.Context, info CallInfo, start func(ctx context.Context) error, wait func(ctx context.Context) error, done func(error)) {
	started := make(chan struct{})
	signal := sync.OnceFunc(func() { close(started) })
	go func() {
		err := w.intercept(ctx, info, func(ctx context.Context) error {
			err := start(ctx)
			signal()
			if err != nil {
				return err
			}
			return wait(ctx)
		})
		signal()
		done(err)
	}()
	<-started
}

// releaseRRefs releases the RRefs a result holds, for a result an
// interceptor failed after the call returned it: the caller never sees it.
func releaseRRefs(v any) {
	walkRRefs(reflect.ValueOf(v), func(ra rrefArg) error {
		if r, ok := ra.(interface{ Release() error }); ok {
			r.Release()
		}
		return nil
	})
}

// funcError is a function's own error, as a server interceptor sees it:
// ErrorKindOf says user for it whatever it wraps (a sentinel from a call
// the function made), as it crosses the wire (see localFailure).
type funcError struct{ err error }

func (e *funcError) Error() string { return e.err.Error() }
func (e *funcError) Unwrap() error { return e.err }

// serveIntercepted runs a peer's call through the server interceptors. It
// is callUser's counterpart: a panic in an interceptor fails the call, and a
// runtime.Goexit answers it, as one in the function does.
func (w *Worker) serveIntercepted(ctx context.Context, cc *callCtx, run core.Run, f registered, found bool, sig uint64, signed bool, dst []byte) (result []byte, refs []core.HandleID, err error) {
	returned := false
	defer w.contained(ctx, cc, run, &returned, &err)
	info := CallInfo{Kind: CallKindCall, Function: run.Fn, Worker: w.name, Peer: w.nameOf(run.From)}
	if run.Kind == core.RunRemote {
		info.Kind = CallKindRemote
	}
	succeeded := false
	err = w.icept.serverChain(ctx, 0, info, func(ctx context.Context) error {
		if refs != nil {
			// An interceptor runs the function again (a retry): what the
			// first run returned goes nowhere.
			w.releaseAll(refs)
			result, refs = nil, nil
		}
		var herr error
		result, refs, herr = w.serve(ctx, cc, run, f, found, sig, signed, dst, false)
		if herr != nil {
			if _, own := herr.(*localFailure); !own {
				herr = &funcError{herr}
			}
		}
		succeeded = herr == nil
		return herr
	})
	if err == nil && !succeeded {
		err = fmt.Errorf("%w: %s on %s", ErrNotRun, run.Fn, w.name)
	}
	if err != nil && (result != nil || refs != nil) {
		// An interceptor failed a call that succeeded: what the function
		// returned goes nowhere.
		w.releaseAll(refs)
		result, refs = nil, nil
	}
	returned = true
	return result, refs, err
}

// callFunction runs a registered function inside an interceptor chain:
// a panic becomes its error, so that the interceptors see it; a
// runtime.Goexit unwinds them to serveIntercepted, which answers the call.
func (w *Worker) callFunction(ctx context.Context, h handler, run core.Run, dst []byte) (res []byte, refs []core.HandleID, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = w.panicked(run, p)
		}
	}()
	return h(ctx, w, run.Args, run.Handles, dst)
}

// ErrorKindOf is the kind of failure err is, as the wire carries it
// (rref.ErrorKindNone for nil), for metrics and logs to count failures by:
// the kinds match the package's sentinels (ErrUnknownFunction is
// unknown_function, context.DeadlineExceeded deadline_exceeded, a dead
// peer or closed worker owner_failed), a function's own error (a
// *UserError, and on the callee whatever the function returned) is user,
// and so is any other error: one an interceptor or the program made. An
// error refused before it left (an unknown worker, an unbound RRef, metadata
// too large) is bad_request.
func ErrorKindOf(err error) rref.ErrorKind {
	if err == nil {
		return rref.ErrorKindNone
	}
	var lf *localFailure
	if errors.As(err, &lf) {
		return lf.kind
	}
	var ue *UserError
	switch {
	case errors.As(err, &ue):
		return rref.ErrorKindUser
	case errors.Is(err, context.DeadlineExceeded):
		return rref.ErrorKindDeadlineExceeded
	case errors.Is(err, context.Canceled):
		return rref.ErrorKindCancelled
	}
	var fe *funcError
	if errors.As(err, &fe) {
		return rref.ErrorKindUser
	}
	for _, k := range sentinelKinds {
		if errors.Is(err, k.err) {
			return k.kind
		}
	}
	return rref.ErrorKindUser
}

// sentinelKinds maps the package's sentinels to the kind each is on the
// wire, in the order ErrorKindOf tries them.
var sentinelKinds = []struct {
	err  error
	kind rref.ErrorKind
}{
	{ErrUnknownFunction, rref.ErrorKindUnknownFunction},
	{ErrTypeMismatch, rref.ErrorKindTypeMismatch},
	{ErrCodec, rref.ErrorKindCodec},
	{ErrTooLarge, rref.ErrorKindTooLarge},
	{ErrTimeout, rref.ErrorKindTimeout},
	{ErrDeleted, rref.ErrorKindDeleted},
	{ErrLost, rref.ErrorKindLost},
	{ErrOwnerFailed, rref.ErrorKindOwnerFailed},
	{ErrPeerFailed, rref.ErrorKindOwnerFailed},
	{ErrClosed, rref.ErrorKindOwnerFailed},
	{ErrFenced, rref.ErrorKindOwnerFailed},
	{ErrUnknownWorker, rref.ErrorKindBadRequest},
	{ErrUnbound, rref.ErrorKindBadRequest},
	{ErrRRefInValue, rref.ErrorKindBadRequest},
	{ErrMetadataTooLarge, rref.ErrorKindBadRequest},
}
