package worker

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/rrefkit/rref/fifo"
	"github.com/rrefkit/rref/generated/rref"
	"github.com/rrefkit/rref/runtime/core"
)

// RRef is a reference to a value of type T that lives on its owner.
// Release it when done; an RRef dropped without Release is released by a
// cleanup once the garbage collector finds it unreachable.
type RRef[T any] struct {
	w     *Worker
	h     core.HandleID
	owner core.WorkerID
	state *releaseState
	wire  uint64 // decoded, not yet bound: the sender's handle (see nested.go)
	fn    string // the function that makes the value, for a Remote made here
}

// releaseState is shared with the cleanup, which must not reach the RRef.
type releaseState struct {
	mu       sync.Mutex
	released bool
	// For the cleanup that releases the handle once the RRef is collected
	// unreleased: it is the cleanup's argument, so that the cleanup is a
	// plain function and costs no closure.
	w *Worker
	h core.HandleID
}

// collected releases a collected RRef's handle unless it was released.
func (s *releaseState) collected() {
	s.mu.Lock()
	done := s.released
	s.released = true
	s.mu.Unlock()
	if !done && !s.w.isClosed() {
		h := s.h
		s.w.apply(func(c *core.Core) { c.Release(h) })
	}
}

// rrefArg lets the runtime find RRefs among arguments and results.
type rrefArg interface {
	handle() (*Worker, core.HandleID)
	newBound(*Worker, core.HandleID) any
}

func (r *RRef[T]) handle() (*Worker, core.HandleID) { return r.w, r.h }

func bindRRef[T any](w *Worker, h core.HandleID) *RRef[T] {
	r := &RRef[T]{}
	r.bindInPlace(w, h)
	return r
}

// bindMade is bindRRef for an RRef the program makes here (Remote,
// NewRRef, Clone), made at site (see callerSite; 0: not recorded).
func bindMade[T any](w *Worker, h core.HandleID, site uintptr) *RRef[T] {
	r := &RRef[T]{}
	r.bindAt(w, h, site)
	return r
}

// Owner names the worker that holds the value.
func (r *RRef[T]) Owner() string {
	if r == nil || r.w == nil {
		return ""
	}
	return r.w.nameOf(r.owner)
}

// IsOwner reports whether the value lives on this worker.
func (r *RRef[T]) IsOwner() bool { return r != nil && r.w != nil && r.owner == r.w.id }

// Confirmed reports whether the owner has confirmed this reference (always
// true on the owner).
func (r *RRef[T]) Confirmed() bool {
	if r == nil || r.w == nil {
		return false
	}
	r.w.mu.Lock()
	defer r.w.mu.Unlock()
	return r.w.c.Handle(r.h).Confirmed
}

// Keep lets a function retain an RRef it received as an argument beyond
// its return (the runtime releases argument RRefs when the function
// returns, unless kept). The caller must Release it later.
func (r *RRef[T]) Keep() *RRef[T] {
	if r == nil || r.w == nil {
		return r
	}
	r.w.mu.Lock()
	r.w.kept[r.h] = true
	r.w.mu.Unlock()
	return r
}

// Clone returns a second, independent reference to the same value on this
// worker; each must be released. A clone of a user's RRef is a new fork the
// owner confirms, like one passed to another worker. A clone of an RRef cut
// off from its value (its owner died, or it was lost) is cut off the same
// way, as a copy passed on would be: a function returns an RRef it keeps by
// returning its clone, and that return must not fail where passing the RRef
// itself would not.
func (r *RRef[T]) Clone() (*RRef[T], error) {
	if r == nil || r.w == nil {
		return nil, ErrUnbound
	}
	if r.w.isClosed() {
		return nil, r.w.closedErr()
	}
	var h core.HandleID
	var err error
	var site uintptr
	r.w.apply(func(c *core.Core) {
		h, err = c.Dup(r.h)
		site = r.w.refNotes[r.h].site // a clone was made where its original was
	})
	if err != nil {
		return nil, refusal(err)
	}
	return bindMade[T](r.w, h, site), nil
}

// Release drops this reference. It is idempotent; the value is freed on its
// owner once the last reference anywhere is released. On a nil *RRef (what
// a failed Remote returns, then released by a defer) it returns ErrUnbound.
func (r *RRef[T]) Release() error {
	if r == nil {
		return fmt.Errorf("%w: Release of a nil %s", ErrUnbound, reflect.TypeFor[*RRef[T]]())
	}
	if r.w == nil {
		return nil
	}
	r.state.mu.Lock()
	done := r.state.released
	r.state.released = true
	r.state.mu.Unlock()
	if done || r.w.isClosed() {
		return nil
	}
	r.w.apply(func(c *core.Core) { c.Release(r.h) })
	return nil
}

// ToHere fetches a copy of the value from its owner (to_here). It waits for
// a value still being created; it fails at once when the owner died, the
// reference was released, lost, or its Remote timed out.
func (r *RRef[T]) ToHere(ctx context.Context) (T, error) {
	if r == nil {
		var zero T
		return zero, fmt.Errorf("%w: ToHere of a nil %s", ErrUnbound, reflect.TypeFor[*RRef[T]]())
	}
	if r.w == nil {
		var zero T
		return zero, ErrUnbound
	}
	if r.w.icept != nil && len(r.w.icept.client) > 0 {
		var v T
		err := r.w.intercept(ctx, r.fetchInfo(), func(ctx context.Context) (err error) {
			v, err = r.awaitFetch(ctx, r.startFetch(ctx, true))
			return err
		})
		return v, err
	}
	// Waited for here, polling the owner's connection like Call, rather
	// than on a goroutine of its own as Fetch does.
	return r.awaitFetch(ctx, r.startFetch(ctx, true))
}

// fetchInfo describes a fetch of r to the client interceptors.
func (r *RRef[T]) fetchInfo() CallInfo {
	return CallInfo{Kind: CallKindFetch, Function: r.fn, Worker: r.w.name, Peer: r.Owner()}
}

// Fetch starts fetching the value at once and returns without waiting: a
// Release right after it still lets the fetch complete.
func (r *RRef[T]) Fetch(ctx context.Context) *Future[T] {
	f := &Future[T]{done: make(chan struct{})}
	if r == nil || r.w == nil {
		f.err = ErrUnbound
		close(f.done)
		return f
	}
	if r.w.icept != nil && len(r.w.icept.client) > 0 {
		var pf pendingFetch
		r.w.interceptAsync(ctx, r.fetchInfo(),
			func(ctx context.Context) error { pf = r.startFetch(ctx, false); return nil },
			func(ctx context.Context) (err error) { f.v, err = r.awaitFetch(ctx, pf); return err },
			func(err error) { f.err = err; close(f.done) })
		return f
	}
	pf := r.startFetch(ctx, false)
	go func() {
		defer close(f.done)
		f.v, f.err = r.awaitFetch(ctx, pf)
	}()
	return f
}

// pendingFetch is a fetch sent and not yet answered.
type pendingFetch struct {
	id    uint64
	ch    chan fetchDone
	start time.Time
	poll  *fifo.Conn // the waiter reads the owner's reply from here itself
}

func (r *RRef[T]) startFetch(ctx context.Context, poll bool) pendingFetch {
	pf := pendingFetch{ch: fetchChans.get(), start: time.Now()}
	r.state.mu.Lock()
	released := r.state.released
	r.state.mu.Unlock()
	h := r.h
	if released {
		h = 0 // the core answers deleted
	}
	if poll {
		pf.poll = r.w.beginPoll(r.owner)
	}
	_, hasDeadline := ctx.Deadline()
	r.w.apply(func(c *core.Core) {
		if r.w.isClosed() { // see startCall
			pf.ch <- fetchDone{FetchResult: core.FetchResult{Err: rref.ErrorKindOwnerFailed}}
			return
		}
		pf.id = c.Fetch(h)
		r.w.fetches.add(pf.id, pf.ch, r.w.defaultDue(hasDeadline))
	})
	return pf
}

func (r *RRef[T]) awaitFetch(ctx context.Context, pf pendingFetch) (v T, err error) {
	w := r.w
	defer func() { w.counts.observeFetch(time.Since(pf.start)) }()
	fr, err := await(ctx, w, r.owner, pf.poll, pf.ch, &w.fetches, pf.id)
	fetchChans.put(pf.ch)
	if fr.frame != nil {
		defer putWireBuf(fr.frame, nil, false) // after the value is decoded
	}
	if err != nil {
		return v, err
	}
	if err = w.fetchError(fr.FetchResult, r.fn, r.owner); err == nil {
		v, err = decodeValue[T](w, fr.Value)
	} else if fr.Err == rref.ErrorKindOwnerFailed && w.isClosed() {
		err = fmt.Errorf("%w (%w)", w.closedErr(), err)
	}
	return v, err
}

// LocalValue returns the value on its owner without any message; elsewhere
// it fails (use ToHere).
func (r *RRef[T]) LocalValue(ctx context.Context) (T, error) {
	var zero T
	if r == nil || r.w == nil {
		return zero, ErrUnbound
	}
	if !r.IsOwner() {
		return zero, fmt.Errorf("worker: LocalValue on %s, which does not own the value (owner %s)", r.w.name, r.Owner())
	}
	return r.ToHere(ctx) // answered locally by the core, no message leaves
}

// encodeArg encodes a value, or finds the RRef it is.
func encodeArg[A any](w *Worker, a A) ([]byte, []core.HandleID, error) {
	return encodeArgTo(w, a, nil)
}

// encodeArgTo is encodeArg, appending to dst when the value is laid out
// directly (see wirebuf.go).
func encodeArgTo[A any](w *Worker, a A, dst []byte) ([]byte, []core.HandleID, error) {
	t := reflect.TypeFor[A]()
	if w.fastCodec() {
		// Laid out from where a is, without boxing it (an allocation).
		if b, ok := appendDirect(dst, t, unsafe.Pointer(&a)); ok {
			return b, nil, nil
		}
	}
	if t.Kind() == reflect.Pointer { // only a pointer can be an RRef, and boxing one is free
		if ra, ok := any(a).(rrefArg); ok {
			if reflect.ValueOf(a).IsNil() {
				return nil, nil, fmt.Errorf("%w: a nil %s", ErrUnbound, t)
			}
			ow, h := ra.handle()
			if ow == nil {
				return nil, nil, ErrUnbound
			}
			if ow != w {
				return nil, nil, fmt.Errorf("worker: an RRef of worker %s passed through worker %s", ow.name, w.name)
			}
			return nil, []core.HandleID{h}, nil
		}
	}
	if holdsRRefs(t) {
		return encodeNested(w, reflect.ValueOf(a))
	}
	b, err := w.cfg.Codec.Marshal(a)
	return b, nil, err
}

// decodeArg decodes a value, or binds the RRef it carries.
func decodeArg[A any](w *Worker, b []byte, hs []core.HandleID) (A, error) {
	t := reflect.TypeFor[A]()
	if w.fastCodec() {
		// Laid out where a is, without handing the codec a pointer to it
		// (which would move a to the heap).
		var a A
		if ok, err := decodeDirect(b, t, unsafe.Pointer(&a)); ok {
			return a, err
		}
	}
	return decodeBoxed[A](w, t, b, hs)
}

// decodeValue decodes a value that holds no RRef (one an RRef refers to).
func decodeValue[T any](w *Worker, b []byte) (T, error) {
	var v T
	if w.fastCodec() {
		if ok, err := decodeDirect(b, reflect.TypeFor[T](), unsafe.Pointer(&v)); ok {
			return v, err
		}
	}
	return decodeBoxedValue[T](w, b)
}

func decodeBoxedValue[T any](w *Worker, b []byte) (T, error) {
	var v T
	err := w.cfg.Codec.Unmarshal(b, &v)
	return v, err
}

func decodeBoxed[A any](w *Worker, t reflect.Type, b []byte, hs []core.HandleID) (A, error) {
	var a A
	if t.Kind() == reflect.Pointer { // only a pointer can be an RRef
		if _, ok := any(a).(rrefArg); ok {
			if len(hs) != 1 {
				return a, fmt.Errorf("worker: expected one RRef, got %d", len(hs))
			}
			// A is *RRef[X]: its nil value still knows how to make a bound one.
			return any(a).(interface {
				newBound(*Worker, core.HandleID) any
			}).newBound(w, hs[0]).(A), nil
		}
	}
	if holdsRRefs(t) {
		return a, decodeNested(w, b, hs, reflect.ValueOf(&a))
	}
	err := w.cfg.Codec.Unmarshal(b, &a)
	return a, err
}

// newBound makes an RRef[T] for handle h; it is called on a nil *RRef[T].
func (*RRef[T]) newBound(w *Worker, h core.HandleID) any { return bindRRef[T](w, h) }

// ErrDuplicateFunction is returned by Register for a name already taken.
var ErrDuplicateFunction = errors.New("worker: function already registered")

// Register makes fn callable by name from every worker of the group. An RRef
// argument (A = *RRef[X]) arrives confirmed by its owner and is released
// when fn returns; an RRef result (R = *RRef[X]) is handed to the caller.
// A name is registered once: a second Register of it returns
// ErrDuplicateFunction and keeps the first function.
func Register[A, R any](w *Worker, name string, fn func(ctx context.Context, arg A) (R, error)) error {
	if name == "" {
		// A caller could only reach it by mistake: an empty name is a
		// variable left unset.
		return fmt.Errorf("worker: Register on %s: an empty function name", w.name)
	}
	if fn == nil {
		return fmt.Errorf("worker: Register of %q on %s: a nil function", name, w.name)
	}
	if strings.Contains(name, signatureSep) {
		return fmt.Errorf("worker: function name %q holds a NUL byte", name)
	}
	w.fmu.Lock()
	defer w.fmu.Unlock()
	if _, dup := w.funcs[name]; dup {
		return fmt.Errorf("%w: %q on %s", ErrDuplicateFunction, name, w.name)
	}
	sig, types := signature[A, R]()
	w.funcs[name] = registered{sig: sig, types: types, result: reflect.TypeFor[R](), h: func(ctx context.Context, w *Worker, args []byte, refs []core.HandleID, dst []byte) ([]byte, []core.HandleID, error) {
		a, err := decodeArg[A](w, args, refs)
		if err != nil {
			return nil, nil, &localFailure{rref.ErrorKindCodec, err}
		}
		r, err := fn(ctx, a)
		if err != nil {
			return nil, nil, err
		}
		out, outRefs, err := encodeArgTo(w, r, dst)
		if err != nil && errors.Is(err, ErrCodec) {
			err = &localFailure{rref.ErrorKindCodec, err}
		}
		if len(outRefs) > 0 && err == nil {
			// Ownership passes to the caller: the local handles are dropped
			// by the runtime, so the RRefs returned must not be released.
			if ra, ok := any(r).(interface{ markReleased() }); ok {
				ra.markReleased()
			} else {
				walkRRefs(reflect.ValueOf(r), func(ra rrefArg) error {
					ra.(interface{ markReleased() }).markReleased()
					return nil
				})
			}
		}
		return out, outRefs, err
	}}
	return nil
}

func (r *RRef[T]) markReleased() {
	if r.state == nil {
		return
	}
	r.state.mu.Lock()
	r.state.released = true
	r.state.mu.Unlock()
}

// defaultDue is the deadline the sweeper enforces on a wait whose context has none.
func (w *Worker) defaultDue(hasDeadline bool) time.Time {
	if hasDeadline {
		return time.Time{}
	}
	return time.Now().Add(w.cfg.CallTimeout)
}

// pendingCall is a call sent and not yet answered.
type pendingCall struct {
	id   uint64
	to   core.WorkerID
	ch   chan callDone
	poll *fifo.Conn // the caller reads its reply from here itself
}

// startCall sends a call at once: its RRef arguments are forked now, so the
// caller may release them as soon as this returns.
func (w *Worker) startCall(ctx context.Context, to string, fn string, args []byte, refs []core.HandleID, poll bool) (pendingCall, error) {
	id, err := w.idOf(to)
	if err != nil {
		return pendingCall{}, err
	}
	meta, err := outgoingEntries(ctx, fn, to)
	if err != nil {
		return pendingCall{}, err
	}
	if err := w.fits(id, fn, args, refs, meta); err != nil {
		return pendingCall{}, err
	}
	// The time left travels with the call, so the callee stops when the
	// caller does: the context's deadline, or the default CallTimeout.
	timeout := w.cfg.CallTimeout
	deadline, hasDeadline := ctx.Deadline()
	if hasDeadline {
		if timeout = time.Until(deadline); timeout <= 0 {
			name, _, _ := splitWireName(fn)
			return pendingCall{}, fmt.Errorf("worker: %s on %s: %w", name, to, context.DeadlineExceeded)
		}
	}
	pc := pendingCall{to: id, ch: callChans.get()}
	if poll {
		pc.poll = w.beginPoll(id)
	}
	closed := false
	w.apply(func(c *core.Core) {
		// Close fails the calls it finds under this lock; later ones must
		// not wait for an answer no one will give.
		if closed = w.isClosed(); closed {
			return
		}
		pc.id, err = c.CallWithMeta(id, fn, args, refs, timeout, meta)
		if err == nil {
			w.calls.add(pc.id, pc.ch, w.defaultDue(hasDeadline))
		}
	})
	if closed || err != nil {
		callChans.put(pc.ch) // never registered
		w.endPoll(id, pc.poll)
		if closed {
			return pendingCall{}, w.closedErr()
		}
		return pendingCall{}, refusal(err)
	}
	return pc, nil
}

// refusal is the worker's error for what the core refused at once (a call,
// a remote, a clone): the peer is dead, or an RRef cannot travel or be
// copied (already released: a cut one travels and copies as a cut copy),
// each matched by its own sentinel.
func refusal(err error) error {
	switch {
	case errors.Is(err, core.ErrHandleLost):
		return fmt.Errorf("%w: %v", ErrLost, err)
	case errors.Is(err, core.ErrUnknownHandle):
		return fmt.Errorf("%w: %v", ErrDeleted, err)
	}
	return fmt.Errorf("%w: %v", ErrPeerFailed, err)
}

// await waits for the result due on ch (registered as id in p) from
// peer. With a polling session begun (conn), it first reads the peer's
// connection itself (see pollFor), then it sleeps until the result comes or
// ctx ends. When ctx ends it withdraws id; a result that came meanwhile is
// returned with ctx's error, for the caller to release what it holds.
func await[T any](ctx context.Context, w *Worker, peer core.WorkerID, conn *fifo.Conn, ch chan T, p *waiting[T], id uint64) (T, error) {
	if conn != nil {
		mayBlock(ctx)
		w.pollFor(ctx, peer, conn, func() bool { return len(ch) > 0 })
		w.endPoll(peer, conn)
	}
	select {
	case res := <-ch:
		return res, nil
	default:
	}
	mayBlock(ctx)
	select {
	case res := <-ch:
		return res, nil
	case <-ctx.Done():
		w.mu.Lock()
		pending := p.take(id) != nil
		w.mu.Unlock()
		var res T
		if !pending {
			res = <-ch // answered meanwhile
		}
		return res, ctx.Err()
	}
}

// Call runs function fn on worker to with arg and waits for its result
// (rpc_sync). An RRef argument is forked to the callee; an RRef result
// arrives usable at once.
func Call[R, A any](ctx context.Context, w *Worker, to, fn string, arg A) (R, error) {
	if w.icept != nil && len(w.icept.client) > 0 {
		var r R
		err := w.intercept(ctx, CallInfo{Kind: CallKindCall, Function: fn, Worker: w.name, Peer: to}, func(ctx context.Context) (err error) {
			r, err = call[R](ctx, w, to, fn, arg)
			return err
		})
		if err != nil {
			releaseRRefs(r) // a result an interceptor failed after the call returned it
			var zero R
			return zero, err
		}
		return r, nil
	}
	return call[R](ctx, w, to, fn, arg)
}

// call is Call past the client interceptors.
func call[R, A any](ctx context.Context, w *Worker, to, fn string, arg A) (R, error) {
	var zero R
	buf := getWireBuf()
	args, refs, err := encodeArgTo(w, arg, *buf)
	if err != nil {
		putWireBuf(buf, args, false)
		return zero, err
	}
	pc, err := w.startCall(ctx, to, wireName[A, R](fn), args, refs, true)
	// Sent (or refused) by now; a refused call kept nothing.
	putWireBuf(buf, args, err == nil && w.keepsSent(pc.to, len(refs)))
	if err != nil {
		return zero, err
	}
	return finishCall[R, A](ctx, w, fn, pc)
}

func finishCall[R, A any](ctx context.Context, w *Worker, fn string, pc pendingCall) (R, error) {
	var zero R
	res, err := await(ctx, w, pc.to, pc.poll, pc.ch, &w.calls, pc.id)
	callChans.put(pc.ch)
	if res.frame != nil {
		defer putWireBuf(res.frame, nil, false) // after the result is decoded
	}
	if err != nil {
		// The callee's function stops too (its context ends as the
		// caller's did: past its deadline, or cancelled); an answer that
		// came meanwhile, or comes later, is released.
		pastDeadline := errors.Is(err, context.DeadlineExceeded)
		w.apply(func(c *core.Core) {
			if pastDeadline {
				c.CancelCallPastDeadline(pc.id)
			} else {
				c.CancelCall(pc.id)
			}
		})
		w.releaseAll(res.Handles)
		return zero, err
	}
	if err := w.callError(res.CallResult, fn, pc.to, callerTypes[A, R]); err != nil {
		w.releaseAll(res.Handles)
		if res.Err == rref.ErrorKindOwnerFailed && w.isClosed() {
			err = fmt.Errorf("%w (%w)", w.closedErr(), err)
		}
		return zero, err
	}
	return decodeArg[R](w, res.Result, res.Handles)
}

// Future is the result of an asynchronous call.
type Future[R any] struct {
	done chan struct{}
	v    R
	err  error
}

// Done is closed when the result is in: select on it beside other events,
// then Wait returns at once.
func (f *Future[R]) Done() <-chan struct{} { return f.done }

// Wait waits for the result.
func (f *Future[R]) Wait(ctx context.Context) (R, error) {
	select {
	case <-f.done:
		return f.v, f.err
	default:
	}
	mayBlock(ctx)
	select {
	case <-f.done:
		return f.v, f.err
	case <-ctx.Done():
		var zero R
		return zero, ctx.Err()
	}
}

// Go calls fn on worker to without waiting (rpc_async). The call leaves
// before Go returns, RRef arguments already forked: the caller may release
// them at once.
func Go[R, A any](ctx context.Context, w *Worker, to, fn string, arg A) *Future[R] {
	f := &Future[R]{done: make(chan struct{})}
	if w.icept != nil && len(w.icept.client) > 0 {
		var pc pendingCall
		w.interceptAsync(ctx, CallInfo{Kind: CallKindCall, Function: fn, Worker: w.name, Peer: to},
			func(ctx context.Context) error {
				args, refs, err := encodeArg(w, arg)
				if err == nil {
					pc, err = w.startCall(ctx, to, wireName[A, R](fn), args, refs, false)
				}
				return err
			},
			func(ctx context.Context) (err error) { f.v, err = finishCall[R, A](ctx, w, fn, pc); return err },
			func(err error) {
				if err != nil {
					releaseRRefs(f.v)
					var zero R
					f.v, f.err = zero, err
				}
				close(f.done)
			})
		return f
	}
	args, refs, err := encodeArg(w, arg)
	var pc pendingCall
	if err == nil {
		pc, err = w.startCall(ctx, to, wireName[A, R](fn), args, refs, false)
	}
	if err != nil {
		f.err = err
		close(f.done)
		return f
	}
	go func() {
		defer close(f.done)
		f.v, f.err = finishCall[R, A](ctx, w, fn, pc)
	}()
	return f
}

// Remote asks worker to to create a value from fn(arg) and returns a
// reference to it at once, before the value exists (remote()).
func Remote[R, A any](ctx context.Context, w *Worker, to, fn string, arg A) (*RRef[R], error) {
	site := w.callerSite() // here, since the interceptors' frames lie between the program and remote
	if w.icept != nil && len(w.icept.client) > 0 {
		var r *RRef[R]
		err := w.intercept(ctx, CallInfo{Kind: CallKindRemote, Function: fn, Worker: w.name, Peer: to}, func(ctx context.Context) (err error) {
			r, err = remote[R](ctx, w, to, fn, arg, site)
			return err
		})
		if err != nil {
			if r != nil {
				r.Release() // made, then failed by an interceptor: no one else holds it
			}
			return nil, err
		}
		return r, nil
	}
	return remote[R](ctx, w, to, fn, arg, site)
}

// remote is Remote past the client interceptors; site is the program's
// Remote call (0 unless Config.RecordRefSites).
func remote[R, A any](ctx context.Context, w *Worker, to, fn string, arg A, site uintptr) (*RRef[R], error) {
	if err := storable[R](); err != nil {
		return nil, err
	}
	id, err := w.idOf(to)
	if err != nil {
		return nil, err
	}
	buf := getWireBuf()
	args, refs, err := encodeArgTo(w, arg, *buf)
	if err != nil {
		putWireBuf(buf, args, false)
		return nil, err
	}
	wire := wireName[A, R](fn)
	meta, err := outgoingEntries(ctx, wire, to)
	if err != nil {
		putWireBuf(buf, args, false)
		return nil, err
	}
	if err := w.fits(id, wire, args, refs, meta); err != nil {
		putWireBuf(buf, args, false)
		return nil, err
	}
	var h core.HandleID
	closed := false
	w.apply(func(c *core.Core) {
		if closed = w.isClosed(); !closed {
			h, err = c.RemoteWithMeta(id, wire, args, refs, meta)
		}
	})
	// Sent (or refused) by now, as in Call: the arguments' buffer goes back
	// unless a message still reads it.
	putWireBuf(buf, args, !closed && err == nil && w.keepsSent(id, len(refs)))
	if closed {
		return nil, w.closedErr()
	}
	if err != nil {
		return nil, refusal(err)
	}
	r := bindMade[R](w, h, site)
	r.owner = id
	r.fn = fn
	if t := w.cfg.RemoteTimeout; t > 0 && id != w.id {
		time.AfterFunc(t, func() {
			if !r.Confirmed() && !w.isClosed() {
				w.apply(func(c *core.Core) { c.Timeout(h) })
			}
		})
	}
	return r, nil
}

// NewRRef creates a value owned by this worker (RRef(v)).
func NewRRef[T any](w *Worker, v T) (*RRef[T], error) {
	if err := storable[T](); err != nil {
		return nil, err
	}
	if w.isClosed() {
		return nil, w.closedErr()
	}
	b, err := w.cfg.Codec.Marshal(v)
	if err != nil {
		return nil, err
	}
	site := w.callerSite()
	var h core.HandleID
	w.apply(func(c *core.Core) {
		h = c.NewLocal(b)
		w.values[c.Handle(h).RRef] = valueNote{typ: reflect.TypeFor[T](), born: time.Since(monoEpoch)}
	})
	return bindMade[T](w, h, site), nil
}

// ErrUnbound: an RRef that no worker made (a zero RRef[T], or one decoded
// outside a call, e.g. from an interface-typed field) refers to nothing.
var ErrUnbound = errors.New("worker: RRef not bound to a worker")

// ErrRRefInValue: a value an RRef refers to is stored and fetched as bytes,
// so it cannot itself hold RRefs (pass them in calls instead).
var ErrRRefInValue = errors.New("worker: the value of an RRef cannot hold RRefs")

func storable[T any]() error {
	t := reflect.TypeFor[T]()
	if t.Implements(rrefIface) || holdsRRefs(t) {
		return fmt.Errorf("%w (%s)", ErrRRefInValue, t)
	}
	return nil
}
