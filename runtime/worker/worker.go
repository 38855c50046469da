// Package worker is rrefkit's public API: workers that call each other,
// create values on one another (Remote), and share typed references to them
// (RRef) with distributed reference counting. A Worker wraps the pure
// protocol core (runtime/core) with goroutines, timers and the FIFO
// transport (fifo): in one process (NewGroup, provider mem), between
// processes on one host (shm) and between hosts (tcp).
//
// The core is touched only under the worker's lock; its outputs (messages,
// functions to run, results) are acted on after the lock is released, so no
// callback ever runs with it held.
package worker

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rrefkit/rref/fifo"
	groupwire "github.com/rrefkit/rref/generated/group"
	"github.com/rrefkit/rref/generated/rref"
	"github.com/rrefkit/rref/internal/hooks"
	"github.com/rrefkit/rref/runtime/core"
)

func init() {
	hooks.WorkerJitter = func(cfg any, jitter func() time.Duration) { cfg.(*Config).jitter = jitter }
	hooks.WorkerRecordSites = func(w any, on bool) { w.(*Worker).recordSites.Store(on) }
}

// Config configures a worker.
type Config struct {
	// Codec encodes arguments, results and values (default Fast).
	Codec Codec
	// CallTimeout bounds a call whose context has no deadline (default 30 s).
	// Either bound travels with the call: the function's context on the
	// callee ends when it has passed, and when the caller's context is
	// cancelled.
	CallTimeout time.Duration
	// Errors are the application's errors that keep their identity across
	// the wire: a function's error that matches one (errors.Is) is sent
	// with its code (the entry's Error() text), and the caller's
	// *UserError matches the caller's own entry of that code, so
	// errors.Is(err, ErrNotFound) holds on both sides. Give every worker
	// of a group the same list.
	Errors []error
	// RemoteTimeout, when set, records a Remote as timed out if the owner has
	// not confirmed it by then: its ToHere fails with ErrTimeout. An owner
	// confirms a Remote that is not fetched at once 200-400 us after its
	// RemoteCall arrives (it waits for the fetch's answer to carry the
	// confirmation: acks.go), so set it to milliseconds at least.
	RemoteTimeout time.Duration
	// FIFO configures the transport, including peer liveness: a peer silent
	// for FIFO.DeadAfter is failed (shm: its heartbeat stops; tcp: keepalive
	// probes every FIFO.Heartbeat go unanswered, or sent data stays
	// unacknowledged), as a closed or reset connection is at once.
	FIFO fifo.Config
	// TLS, when set, runs every tcp connection of Start inside mutual TLS
	// 1.3 (see fifo.WithTLS): Certificates holds this member's certificate,
	// RootCAs and ClientCAs the group's authority, and ClientAuth should be
	// tls.RequireAndVerifyClientCert. The group secret is still checked,
	// bound to the TLS session. Between hosts on an untrusted network, set
	// it: without TLS, traffic after the handshake is neither private nor
	// authenticated.
	TLS *tls.Config
	// Logger receives protocol errors and peer failures (default slog.Default()).
	Logger *slog.Logger
	// OnPeerFailed, when set, is told once of each peer this worker finds
	// dead or closed (its name and why), after the protocol has acted on
	// it: fetches from it failed, its references reclaimed. It runs on a
	// goroutine of the worker's; it must not block.
	OnPeerFailed func(peer string, err error)
	// OnFenced, when set, is told if the group fenced this worker: a peer
	// took it for dead (it was paused past FIFO.DeadAfter, say) and every
	// member has reclaimed its references. The worker closes right after.
	// It runs on a goroutine of the worker's; it must not block.
	OnFenced func(err error)
	// RecordRefSites records, for Refs and the debug listener's view of
	// references (runtime/observe), where each reference this worker makes
	// was made (the file:line of the Remote or NewRRef call; a Clone keeps
	// its original's) and when and as which type each reference was bound
	// here. Off, references show their state and holders but no site, age
	// or type of their own (a value's owner always knows its type and age).
	// It costs a stack lookup and a map entry per reference: bench rpc
	// measures Remote plus ToHere with it on and off.
	RecordRefSites bool
	// Setup, when set, runs on each new worker before any peer is connected:
	// register functions here, so no call can arrive before its function.
	Setup func(w *Worker)
	// ServerInterceptors run, in order (the first outermost), around each
	// function a peer's Call, Go or Remote runs on this worker, and
	// ClientInterceptors around each Call, Go, Remote, ToHere and Fetch it
	// makes (see intercept.go). With none, a call costs nothing more.
	ServerInterceptors []ServerInterceptor
	ClientInterceptors []ClientInterceptor
	// jitter delays each protocol message by the duration it returns
	// before sending it, so messages overtake one another (the protocol
	// assumes no delivery order). For tests: set through hooks.WorkerJitter.
	jitter func() time.Duration
	// startNotice is how often Start logs the members it still waits for
	// (startNoticeEvery when 0); tests shorten it.
	startNotice time.Duration
}

func (c Config) withDefaults() Config {
	if c.Codec == nil {
		c.Codec = Fast
	}
	if c.CallTimeout == 0 {
		c.CallTimeout = 30 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.FIFO.SocketSpin == 0 {
		// A message from a tcp peer passes a receiving goroutine before the
		// one that waits for it: spinning on the socket spares a netpoller
		// wake-up per hop (see fifo.Config.SocketSpin). Negative: never.
		c.FIFO.SocketSpin = 30 * time.Microsecond
	}
	return c
}

// handler runs a registered function on encoded arguments.
// The result may be appended to dst (see wirebuf.go).
type handler func(ctx context.Context, w *Worker, args []byte, refs []core.HandleID, dst []byte) (result []byte, resultRefs []core.HandleID, err error)

// registered is a function as Register recorded it: its handler and the
// fingerprint and description of its types (signature).
type registered struct {
	h      handler
	sig    uint64
	types  string
	result reflect.Type // of the values a Remote of it makes, for LeakError
}

// Worker is one member of a group.
type Worker struct {
	cfg   Config
	name  string
	id    core.WorkerID
	names []string // index id-1

	// readies holds the buffers the core's outputs circulate in (see
	// core.TakeReadyInto): effects keeps nothing of a Ready's slices, and
	// no message in one it has not taken out, so each goes back once acted
	// on, and the core reuses its messages. One pool per worker, so that a
	// core gets back its own messages.
	readies sync.Pool

	mu sync.Mutex // guards c and the maps below
	c  *core.Core
	// Calls and fetches awaiting results. Those whose context had no
	// deadline get the default one, and one sweeper fails the overdue,
	// instead of a timer per call.
	calls   waiting[callDone]
	fetches waiting[fetchDone]
	kept    map[core.HandleID]bool  // argument RRefs a function kept
	calling map[callKey]*callCtx    // calls from peers being run, chained by key (cancel.go)
	remotes map[core.RRefID]running // functions making values for Remotes, until they return
	ctxSlab ctxSlab                 // where their contexts come from (w.mu)
	// values notes the values this worker owns, once created: when, and
	// their type when known (NewRRef, a Remote of a registered function),
	// so that a LeakError can show them decoded and Refs their age.
	values map[core.RRefID]valueNote
	// refNotes notes where, when and as what each of the program's
	// references was made, while Config.RecordRefSites is on (refs.go).
	refNotes        map[core.HandleID]refNote
	refNotesPruneAt int // the size at which refNotes drops released handles
	dead            map[core.WorkerID]bool
	// mourned holds the dead peers whose failure the core has been told
	// of, and whose consequences (failed fetches, released forks) are
	// queued: SettleGroup waits for it.
	mourned map[core.WorkerID]bool

	fmu   sync.RWMutex
	funcs map[string]registered

	// peers and outboxes are indexed id-1. A peer's connection is nil
	// until it is attached (Start connects peers one by one); its outbox
	// exists from the start, so a message for a peer not yet attached
	// waits there instead of being lost. Both are nil for this worker.
	peers    []atomic.Pointer[fifo.Conn]
	outboxes []*outbox
	listener *fifo.TCPListener // Start's, open until Close for re-dials of broken links; nil when none
	ctx      context.Context
	cancel   context.CancelFunc
	gs       *goroutines           // the worker's own; Close waits for them
	member   memberMachine         // running, leaving (Shutdown), closed: member.go
	fenceErr atomic.Pointer[error] // set when the group fenced this worker: fence.go
	// recordSites is Config.RecordRefSites, which the bench flips to
	// measure its cost against the same connection.
	recordSites atomic.Bool
	// GOMAXPROCS > 1, read at start and by the sweeper (reading it takes
	// the scheduler's lock): callers poll only then.
	multiProc atomic.Bool

	running   atomic.Int64 // user functions running; Shutdown waits for them
	jittering atomic.Int64 // messages held back by Config.jitter
	acks      heldAcks     // RemoteRets the core holds back (acks.go)
	counts    counters
	rx        receivers
	// readyFrom marks the peers that said all their links are up (Start),
	// and readyNote tells Start that one did.
	readyFrom []atomic.Bool
	readyNote chan struct{}
	// maxMessage is the largest frame the transport takes (fifo.Config.MaxMessage).
	maxMessage int
	bar        barrier
	icept      *interceptors // nil when Config has none

	stats struct {
		bytesOut, bytesIn  atomic.Uint64 // frame counts are w.bar's
		handoffs, overruns atomic.Uint64
	}
}

func newWorker(names []string, id core.WorkerID, cfg Config) *Worker {
	ctx, cancel := context.WithCancel(context.Background())
	w := &Worker{cfg: cfg.withDefaults(), name: names[id-1], id: id, names: names,
		calls: newWaiting[callDone](), fetches: newWaiting[fetchDone](), kept: map[core.HandleID]bool{},
		calling: map[callKey]*callCtx{}, remotes: map[core.RRefID]running{}, values: map[core.RRefID]valueNote{},
		dead: map[core.WorkerID]bool{}, mourned: map[core.WorkerID]bool{}, funcs: map[string]registered{}, peers: make([]atomic.Pointer[fifo.Conn], len(names)),
		outboxes: make([]*outbox, len(names)), ctx: ctx, cancel: cancel}
	for i := range names {
		if core.WorkerID(i+1) != id {
			w.outboxes[i] = &outbox{ready: make(chan struct{}, 1)}
		}
	}
	// The core knows workers by index; its errors name them as the
	// program does.
	w.c = core.New(id, core.WithDeferredAcks(), core.WithNames(w.nameOf))
	w.readies.New = func() any { return new(core.Ready) }
	w.acks.delay = ackDelay
	w.maxMessage = maxMessageOf(w.cfg.FIFO)
	if len(cfg.ServerInterceptors)+len(cfg.ClientInterceptors) > 0 {
		w.icept = &interceptors{server: slices.Clone(cfg.ServerInterceptors), client: slices.Clone(cfg.ClientInterceptors)}
	}
	w.readyFrom, w.readyNote = make([]atomic.Bool, len(names)), make(chan struct{}, 1)

	w.recordSites.Store(w.cfg.RecordRefSites)
	w.bar = newBarrier(len(names))
	w.rx = receivers{active: map[*receiver]struct{}{}, wake: make(chan struct{}, 1),
		polling: make([]atomic.Bool, len(names))}
	w.multiProc.Store(runtime.GOMAXPROCS(0) > 1)
	w.gs = newGoroutines()
	w.gs.start(w.sweep)
	w.gs.start(w.watchdog)
	return w
}

// Name is this worker's name.
func (w *Worker) Name() string { return w.name }

func (w *Worker) idOf(name string) (core.WorkerID, error) {
	for i, n := range w.names {
		if n == name {
			return core.WorkerID(i + 1), nil
		}
	}
	return 0, fmt.Errorf("%w %q", ErrUnknownWorker, name)
}

func (w *Worker) nameOf(id core.WorkerID) string {
	if id >= 1 && int(id) <= len(w.names) {
		return w.names[id-1]
	}
	return fmt.Sprintf("worker#%d", id)
}

// apply runs f on the core under the lock, then acts on what it produced.
// It reports whether another goroutine was handed work (a function to run,
// a result to take).
func (w *Worker) apply(f func(c *core.Core)) bool {
	rd := w.readies.Get().(*core.Ready)
	w.mu.Lock()
	f(w.c)
	w.c.TakeReadyInto(rd)
	w.trackCalls(rd)
	w.mu.Unlock()
	handedOff := w.effects(*rd)
	w.readies.Put(rd)
	return handedOff
}

// effects acts on a core's outputs, outside the lock.
func (w *Worker) effects(r core.Ready) (handedOff bool) {
	return w.effectsOf(r, nil)
}

// effectsOf is effects for the outputs of a frame received in frame, a
// pooled buffer (nil: not pooled). When the frame's one product is a call's
// result or a fetched value and the waiter copies what it decodes, the
// buffer goes to the waiter with it, to be given back once decoded
// (finishCall, awaitFetch): a reply costs no allocation, whether the
// receiving goroutine read it or a caller polling its connection (pollFor).
func (w *Worker) effectsOf(r core.Ready, frame *[]byte) (handedOff bool) {
	handedOff = len(r.Runs) > 0 || len(r.Fetches) > 0 || len(r.Calls) > 0
	if frame == nil || len(r.Calls)+len(r.Fetches) != 1 || len(r.Runs) > 0 || !w.fastCodec() {
		frame = nil
	}
	for _, err := range r.Errors {
		w.cfg.Logger.Warn("rref protocol error", "worker", w.name, "err", err)
	}
	for _, fr := range r.Fetches {
		if !hand(w, &w.fetches, fr.FetchID, fetchDone{fr, frame}) && frame != nil {
			putWireBuf(frame, nil, false) // the fetcher gave up
		}
	}
	for _, cr := range r.Calls {
		if !hand(w, &w.calls, cr.CallID, callDone{cr, frame}) {
			// The caller gave up: release what the call returned.
			w.releaseAll(cr.Handles)
			if frame != nil {
				putWireBuf(frame, nil, false)
			}
		}
	}
	for _, run := range r.Runs {
		w.spawn(run)
	}
	if len(r.DeferredAcks) > 0 {
		w.holdAcks(r.DeferredAcks)
	}
	var self []core.Envelope
	for i, m := range r.Messages {
		if m.To == w.id {
			self = append(self, m)
			continue
		}
		if w.send(m) {
			r.Messages[i].Msg = nil // kept past this call: not for the core to reuse
		}
	}
	for _, m := range self {
		if w.apply(func(c *core.Core) { c.Deliver(w.id, m.Msg) }) {
			handedOff = true
		}
	}
	return handedOff
}

// hand gives v to whoever waits for id in p, and reports whether anyone did.
func hand[T any](w *Worker, p *waiting[T], id uint64, v T) bool {
	w.mu.Lock()
	ch := p.take(id)
	w.mu.Unlock()
	if ch != nil {
		ch <- v
	}
	return ch != nil
}

// conn returns the connection to peer id, or nil while it is not attached.
func (w *Worker) conn(id core.WorkerID) *fifo.Conn {
	if id < 1 || int(id) > len(w.peers) {
		return nil
	}
	return w.peers[id-1].Load()
}

// outbox queues frames for one peer. A receive loop never blocks on a send:
// two workers whose rings are both full would otherwise wait on each other.
type outbox struct {
	mu      sync.Mutex
	conn    *fifo.Conn // nil until attached: frames queue until then
	frames  [][]byte
	sending int // frames taken by the drainer and not yet handed to the transport
	ready   chan struct{}
	// Deletes waiting for a frame to ride with (lazy.go), in pooled
	// buffers, and the timer that sends them alone.
	lazy      []*[]byte
	lazyArmed bool
	lazyTimer *time.Timer
}

// queued counts the frames not yet handed to the transport; the caller
// holds ob.mu.
func (ob *outbox) queued() int { return len(ob.frames) + ob.sending + len(ob.lazy) }

// queuedFrames counts the frames not yet handed to the transport, to
// every peer.
func (w *Worker) queuedFrames() int {
	n := 0
	for _, ob := range w.outboxes {
		if ob != nil {
			ob.mu.Lock()
			n += ob.queued()
			ob.mu.Unlock()
		}
	}
	return n
}

// send sends m now, or later under jitter, and reports whether it kept m to
// send later.
func (w *Worker) send(m core.Envelope) (kept bool) {
	if w.cfg.jitter != nil {
		if d := w.cfg.jitter(); d > 0 {
			w.jittering.Add(1)
			time.AfterFunc(d, func() {
				defer w.jittering.Add(-1)
				if !w.isClosed() {
					w.sendNow(m)
				}
			})
			return true
		}
	}
	w.sendNow(m)
	return false
}

// framePool holds buffers for frames the transport copies at once.
var framePool = sync.Pool{New: func() any { b := make([]byte, 0, 256); return &b }}

const maxPooledFrame = 64 << 10

func (w *Worker) sendNow(m core.Envelope) {
	if m.To < 1 || int(m.To) > len(w.outboxes) || w.outboxes[m.To-1] == nil {
		// The core addresses only members: this is a bug, never silence.
		w.cfg.Logger.Error("rref message for no member dropped", "worker", w.name, "to", m.To, "msg", m.Msg.MessageCode())
		return
	}
	ob := w.outboxes[m.To-1]
	if size := w.oversize(m.Msg); size > 0 {
		w.refuseTooLarge(m, size)
		return
	}
	buf := framePool.Get().(*[]byte)
	frame := rref.AppendFrame((*buf)[:0], m.Msg)
	if len(frame) > w.maxMessage {
		// Grown past the limit by what oversize does not measure ahead
		// (a long error text, many RRefs).
		w.refuseTooLarge(m, len(frame))
		return
	}
	*buf = frame
	ob.mu.Lock()
	if deferrable(m) && ob.conn != nil && ob.conn.Corks() {
		w.deferLocked(ob, m.To, buf)
		ob.mu.Unlock()
		return
	}
	w.sendLocked(ob, m.To, buf)
}

// sendLocked sends the deferred deletes for peer to, then the frame in buf
// (nil: none), and unlocks ob.mu. With nothing queued ahead it sends from
// this goroutine while the ring has room, with no hand-off, in one write
// where the transport batches; the rest goes to the drainer, which waits
// for credits.
func (w *Worker) sendLocked(ob *outbox, to core.WorkerID, buf *[]byte) {
	bufs := ob.lazy
	if buf != nil {
		bufs = append(bufs, buf)
	}
	ob.lazy = ob.lazy[:0]
	sent := 0
	var err error
	if ob.conn != nil && len(ob.frames) == 0 && ob.sending == 0 {
		corked := len(bufs) > 1 && ob.conn.Corks()
		if corked {
			ob.conn.Cork()
		}
		for _, b := range bufs {
			var ok bool
			if ok, err = ob.conn.TrySend(*b); !ok || err != nil {
				break
			}
			sent++
			w.countFrame(true, to, *b)
		}
		if corked {
			ob.conn.Uncork() // a failed write is the connection's failure, reported below or by its next send
		}
	}
	if err == nil {
		for _, b := range bufs[sent:] {
			ob.frames = append(ob.frames, *b) // the drainer owns it now (or will, once attached)
		}
	}
	for _, b := range bufs[:sent] {
		if cap(*b) <= maxPooledFrame {
			framePool.Put(b) // the transport copied it
		}
	}
	// bufs may share ob.lazy's array, which the next deferred delete
	// reuses: done with under the lock.
	clear(bufs)
	queued := len(ob.frames) > 0
	ob.mu.Unlock()
	if err != nil && !w.isClosed() {
		w.peerFailed(to, err)
	}
	if queued {
		ob.signal()
	}
}

func (ob *outbox) signal() {
	select {
	case ob.ready <- struct{}{}:
	default:
	}
}

// drain sends a peer's queued frames in order.
func (w *Worker) drain(to core.WorkerID, conn *fifo.Conn, ob *outbox) {
	for {
		select {
		case <-w.ctx.Done():
			return
		case <-ob.ready:
		}
		ob.mu.Lock()
		frames := ob.frames
		ob.frames = nil
		ob.sending = len(frames)
		ob.mu.Unlock()
		for _, f := range frames {
			err := conn.Send(w.ctx, f)
			if err == nil {
				// Counted before it leaves sending: the barriers, which
				// read both, never see a frame in neither.
				w.countFrame(true, to, f)
			}
			ob.mu.Lock()
			ob.sending--
			ob.mu.Unlock()
			if err != nil {
				if !w.isClosed() {
					w.peerFailed(to, err)
				}
				return
			}
		}
	}
}

// countFrame records one frame handed to, or taken from, the transport.
func (w *Worker) countFrame(out bool, peer core.WorkerID, frame []byte) {
	if out {
		w.bar.sent[peer-1].Add(1) // MessagesSent and the shutdown barrier
		w.stats.bytesOut.Add(uint64(len(frame)))
	} else {
		w.stats.bytesIn.Add(uint64(len(frame)))
	}
	w.counts.count(out, frame)
}

// attach starts the goroutines serving the connection to peer id; frames
// queued for it meanwhile leave first, in order.
func (w *Worker) attach(id core.WorkerID, conn *fifo.Conn) {
	ob := w.outboxes[id-1]
	ob.mu.Lock()
	ob.conn = conn
	w.peers[id-1].Store(conn)
	queued := len(ob.frames) > 0
	ob.mu.Unlock()
	if !w.gs.start(func() { w.drain(id, conn, ob) }) {
		conn.Close() // closed meanwhile
		return
	}
	if queued {
		ob.signal()
	}
	w.startReceiver(id, conn)
}

// peerFailed tells the core a peer died: its references are reclaimed, and
// calls and fetches that depend on it fail.
func (w *Worker) peerFailed(id core.WorkerID, cause error) {
	w.mu.Lock()
	already := w.dead[id]
	w.dead[id] = true
	w.mu.Unlock()
	if already || w.isClosed() {
		return
	}
	switch {
	case errors.Is(cause, fifo.ErrClosed) && !w.isRunning():
		// Expected: the barrier settled and the peer closed first.
		w.cfg.Logger.Debug("peer closed", "worker", w.name, "peer", w.nameOf(id))
	case errors.Is(cause, fifo.ErrClosed):
		w.cfg.Logger.Info("peer closed", "worker", w.name, "peer", w.nameOf(id), "err", cause)
	default:
		w.cfg.Logger.Warn("peer failed", "worker", w.name, "peer", w.nameOf(id), "err", cause)
	}
	if !(errors.Is(cause, fifo.ErrClosed) && !w.isRunning()) {
		w.announceFence(id, cause)
	}
	if conn := w.conn(id); conn != nil {
		conn.Close()
	}
	w.apply(func(c *core.Core) { c.PeerFailed(id) })
	w.mu.Lock()
	w.mourned[id] = true
	w.mu.Unlock()
	if f := w.cfg.OnPeerFailed; f != nil {
		f(w.nameOf(id), cause)
	}
}

func (w *Worker) releaseAll(hs []core.HandleID) {
	if len(hs) == 0 {
		return
	}
	w.apply(func(c *core.Core) {
		for _, h := range hs {
			c.Release(h)
		}
	})
}

// spawn runs a function on a goroutine of its own, which Close does not
// wait for (see goroutines).
func (w *Worker) spawn(run core.Run) {
	w.running.Add(1)
	go w.execute(w.ctx, run)
}

// execute runs a user function the core asked for, then answers it; the
// caller has counted it in w.running. RRefs received as arguments belong to
// the call: they are released when the function returns (pass them on, or
// return them, to keep them alive). A call's context ends with the
// caller's deadline (Run.Timeout) and when the caller cancels it.
func (w *Worker) execute(ctx context.Context, run core.Run) {
	defer w.running.Add(-1) // after the answer below is handed to the transport
	var cc *callCtx
	if run.Kind == core.RunCall {
		cc = w.callContext(ctx, run)
		ctx = cc
	}
	name, sig, signed := splitWireName(run.Fn)
	run.Fn = name
	w.fmu.RLock()
	f, ok := w.funcs[name]
	w.fmu.RUnlock()
	ctx = withIncoming(ctx, run.Meta)
	var result []byte
	var refs []core.HandleID
	var err error
	var dst []byte
	if run.Kind == core.RunCall { // a Remote's value stays with its owner: no buffer to give back
		buf := getWireBuf()
		dst = *buf
		// Given back once the answer is out, unless keepsSent says the
		// result is still read.
		defer func() { putWireBuf(buf, result, w.keepsSent(run.From, len(refs))) }()
	}
	if w.icept == nil {
		result, refs, err = w.serve(ctx, cc, run, f, ok, sig, signed, dst, true)
	} else {
		result, refs, err = w.serveIntercepted(ctx, cc, run, f, ok, sig, signed, dst)
	}
	var made reflect.Type // the type of the value a Remote made, for LeakError and Refs
	if run.Kind == core.RunRemote && err == nil {
		made = f.result
	}
	w.answer(run, cc, made, result, refs, err)
}

// serve runs the function a run names, f (found: registered), unless it
// cannot run: no such function, the caller's types are not its own
// (signed: the caller sent its types' fingerprint sig), or the call ended
// before it began. contain runs it with panics and runtime.Goexit
// contained (callUser; cc is a call's context, nil for a Remote's run);
// inside a server interceptor chain, which contains them itself, it is
// false (callFunction).
func (w *Worker) serve(ctx context.Context, cc *callCtx, run core.Run, f registered, found bool, sig uint64, signed bool, dst []byte, contain bool) (result []byte, refs []core.HandleID, err error) {
	switch {
	case !found:
		return nil, nil, &localFailure{rref.ErrorKindUnknownFunction, fmt.Errorf("%w %q on %s", ErrUnknownFunction, run.Fn, w.name)}
	case signed && sig != f.sig:
		return nil, nil, &localFailure{rref.ErrorKindTypeMismatch, fmt.Errorf("%w: %s on %s %s", ErrTypeMismatch, run.Fn, w.name, f.types)}
	case ctx.Err() != nil:
		return nil, nil, ctx.Err() // cancelled, or past its deadline, before it began
	}
	if contain {
		result, refs, err = w.callUser(ctx, cc, f.h, run, dst)
	} else {
		result, refs, err = w.callFunction(ctx, f.h, run, dst)
	}
	if run.Kind == core.RunRemote && len(refs) > 0 && err == nil {
		err = fmt.Errorf("%w: function %s returned RRefs to a Remote", ErrRRefInValue, run.Fn)
	}
	return result, refs, err
}

// answer completes a function the core asked for with its outcome; cc is
// a call's context, ended here; made is the type of a value a Remote made
// (recorded under the same lock as the value, before it can be freed).
func (w *Worker) answer(run core.Run, cc *callCtx, made reflect.Type, result []byte, refs []core.HandleID, err error) {
	fail := w.failureOf(err)
	if fail.Kind == rref.ErrorKindCancelled && w.ctx.Err() != nil {
		// Cancelled because this worker is closing, not by the caller: to
		// the caller it is a peer that went away (ErrPeerFailed), as it
		// would be had the answer not made it out.
		fail = core.Failure{Kind: rref.ErrorKindOwnerFailed, Message: "worker " + w.name + " closed"}
	}
	w.apply(func(c *core.Core) {
		if run.Kind == core.RunCall {
			w.endCall(run, cc)
		}
		switch run.Kind {
		case core.RunRemote:
			// Noted before CompleteRemote, which may free it at once:
			// trackCalls then forgets it with the value.
			w.values[run.RRef] = valueNote{typ: made, born: w.remotes[run.RRef].since}
			delete(w.remotes, run.RRef)
			c.CompleteRemote(run.RRef, result, fail)
		case core.RunCall:
			if rerr := c.Return(run.From, run.CallID, result, refs, fail); rerr != nil {
				// A returned RRef cannot travel: it was released already
				// (one cut off by a death travels, as a cut copy). The
				// caller learns it as a failure of the result, not as the
				// function's own.
				kind := rref.ErrorKindUser
				if errors.Is(rerr, core.ErrHandleLost) {
					kind = rref.ErrorKindLost
				}
				c.Return(run.From, run.CallID, nil, nil, core.Failure{Kind: kind, Message: fmt.Sprintf("its result: %v", rerr)})
			}
		}
		// The call's arguments and the handles it returned (now forked to
		// the caller) are this worker's to drop.
		for _, x := range run.Handles {
			if w.kept[x] {
				delete(w.kept, x)
				continue
			}
			c.Release(x)
		}
		for _, x := range refs {
			c.Release(x)
		}
	})
}

// errTimedOut marks a call or fetch failed by the sweeper.
var errTimedOut = errors.New("no answer within Config.CallTimeout")

// sweep fails calls and fetches past their default deadline, and ticks the
// core's clock, which expires what it keeps for values never created.
func (w *Worker) sweep() {
	t := time.NewTicker(max(w.cfg.CallTimeout/20, 10*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-w.ctx.Done():
			return
		case now := <-t.C:
			w.multiProc.Store(runtime.GOMAXPROCS(0) > 1)
			w.mu.Lock()
			calls, fetches := w.calls.overdue(now), w.fetches.overdue(now)
			w.mu.Unlock()
			w.apply(func(c *core.Core) { c.Tick() })
			for _, ch := range calls {
				ch <- callDone{CallResult: core.CallResult{Err: rref.ErrorKindDeadlineExceeded, Message: errTimedOut.Error()}}
			}
			for _, ch := range fetches {
				ch <- fetchDone{FetchResult: core.FetchResult{Err: rref.ErrorKindDeadlineExceeded, Message: errTimedOut.Error()}}
			}
		}
	}
}

// DebugInfo are the core's debug counters and the transport's traffic.
type DebugInfo struct {
	core.Counters
	// Protocol messages handed to the transport, and received and acted on.
	MessagesSent, MessagesReceived uint64
	BytesSent, BytesReceived       uint64
	PendingCalls, PendingFetches   int
	// Outgoing counts messages not yet handed to the transport (queued or
	// held back by jitter) and functions still running.
	Outgoing int
	// Functions run on the goroutine that received their call; Handoffs
	// counts those that gave their connection to a new receiving goroutine
	// because they waited in this package, Overruns those the watchdog
	// moved because they ran past the inline limit (see receive.go).
	Handoffs, Overruns uint64
	// The transport's, over all connections (see fifo.Stats): sends that
	// waited for credits, receivers that parked, and wake-up calls made for
	// parked peers.
	CreditStalls, Parks, WakeUps uint64
}

// transportStats sums the fifo counters of the worker's connections.
func (w *Worker) transportStats() (s fifo.Stats) {
	for i := range w.peers {
		if c := w.peers[i].Load(); c != nil {
			cs := c.Stats()
			s.CreditStalls += cs.CreditStalls
			s.Parks += cs.Parks
			s.WakeUps += cs.WakeUps
		}
	}
	return s
}

// DebugInfo returns the worker's counters.
func (w *Worker) DebugInfo() DebugInfo {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := int(w.jittering.Load()+w.running.Load()) + w.queuedFrames()
	c := w.bar.snapshot()
	ts := w.transportStats()
	return DebugInfo{Counters: w.c.Counters(), MessagesSent: sum(c.sent), MessagesReceived: sum(c.taken),
		BytesSent: w.stats.bytesOut.Load(), BytesReceived: w.stats.bytesIn.Load(),
		PendingCalls: w.calls.len(), PendingFetches: w.fetches.len(), Outgoing: out,
		Handoffs: w.stats.handoffs.Load(), Overruns: w.stats.overruns.Load(),
		CreditStalls: ts.CreditStalls, Parks: ts.Parks, WakeUps: ts.WakeUps}
}

func sum(v []uint64) (n uint64) {
	for _, x := range v {
		n += x
	}
	return n
}

// LeakError lists what a worker still held when a graceful shutdown gave
// up, by value and worker name, each value decoded when its owner knows
// its type. ShutdownGroup joins one for each worker that held something.
type LeakError struct {
	Worker string
	Held   []HeldRef
	// Running are the functions this worker still ran: one that ignores
	// its context holds the barrier up for as long as it runs.
	Running []RunningFunction
	at      time.Time // when it was taken, for how long each has run
	// Waiting is what held the group's barrier up, when this worker held
	// nothing itself (otherwise what it held is the answer).
	Waiting string
	// State is the protocol core's own record of everything it holds, one
	// record a line (core.Dump), for debugging the protocol itself.
	State string
}

// HeldKind says what a HeldRef is.
type HeldKind uint8

const (
	HeldValue     HeldKind = iota + 1 // a value this worker owns, kept alive by references to it
	HeldReference                     // this worker's reference to a value on another worker
	HeldLent                          // a copy of a reference lent to another worker, kept until the owner confirms it
)

// HeldRef is one reference a worker still held at shutdown.
type HeldRef struct {
	Kind  HeldKind
	RRef  string // the value's id, short: its creator's name and the first digits of its number
	Owner string // the worker the value lives on
	// HeldValue: the value (decoded when its type is known here, else its
	// size), and who keeps it alive: the workers whose references are
	// known to the owner, this one included for its program's handles.
	Value   string
	Holders []string
	// HeldReference: whether the owner has confirmed it.
	Confirmed bool
	// HeldLent: the worker the copy went to.
	To string
}

// RunningFunction is a function a worker was still running when a
// graceful shutdown gave up.
type RunningFunction struct {
	Function string    // its registered name
	Caller   string    // the worker whose call, or Remote, it runs for
	Remote   bool      // it makes a Remote's value, rather than answering a call
	Since    time.Time // when this worker was handed it to run
}

func (e *LeakError) Error() string        { return e.describe() }
func (e *LeakError) Is(target error) bool { return target == ErrLeak }

// Close closes the worker at once: its connections close, pending calls and
// fetches on it fail, and its peers see it as failed.
func (w *Worker) Close() error {
	if !w.stepMember(groupwire.MemberOnClose) {
		return nil // closed already
	}
	w.teardown()
	return nil
}

// teardown closes the worker, once its Member machine has moved to closed
// (by Close, the barrier's confirmation or the group's fence).
func (w *Worker) teardown() {
	w.cancel()
	for i := range w.peers {
		if c := w.peers[i].Load(); c != nil {
			c.Close()
		}
	}
	if w.listener != nil {
		w.listener.Close()
	}
	w.gs.wait()
	if n := w.running.Load(); n > 0 {
		// They may block forever: Close does not wait for them. What they
		// return later is dropped (their connections are closed).
		w.mu.Lock()
		fns := w.runningFunctions()
		w.mu.Unlock()
		w.cfg.Logger.Warn("rref worker closed with functions still running; their results are dropped", "worker", w.name, "running", n,
			"functions", describeRunning(fns, time.Now(), "; "))
	}
	w.mu.Lock()
	calls, fetches := w.calls.drain(), w.fetches.drain()
	w.mu.Unlock()
	for id, ch := range calls {
		ch <- callDone{CallResult: core.CallResult{CallID: id, Err: rref.ErrorKindOwnerFailed, Message: "worker closed"}}
	}
	for id, ch := range fetches {
		ch <- fetchDone{FetchResult: core.FetchResult{FetchID: id, Err: rref.ErrorKindOwnerFailed}}
	}
}
