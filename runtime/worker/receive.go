package worker

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rrefkit/rref/fifo"
	groupwire "github.com/rrefkit/rref/generated/group"
	"github.com/rrefkit/rref/runtime/core"
)

// A function a peer calls runs on the goroutine that received the call, as
// in run-to-completion RPC systems: no goroutine is created, no hand-off
// costs a wake-up, and the stack is already grown. A function that blocks
// must not stall its connection, though (a function that calls back the
// worker that called it would wait for a message its own goroutine should
// receive), so the receiver hands its connection to a new receiving
// goroutine:
//   - at once, when the function waits in this package (Call, ToHere,
//     Future.Wait, ...) with the context it was given, or one derived from it;
//   - after inlineLimit, noticed by a watchdog, when it blocks anywhere
//     else (a lock, a channel, a sleep) or simply runs long.
//
// The old goroutine finishes its function, answers it and exits. Frames
// are still applied one at a time in order while only one goroutine
// receives; after a hand-off the protocol needs no delivery order anyway.

// inlineLimit is how long a function may hold its connection's receiving
// goroutine before the watchdog gives the connection a new one.
const inlineLimit = 500 * time.Microsecond

// receiver is one goroutine receiving from one peer.
type receiver struct {
	w    *Worker
	from core.WorkerID
	conn *fifo.Conn
	ctx  context.Context // w.ctx carrying this receiver, for the functions it runs

	inline   atomic.Uint64 // the number of the function it runs inline; 0: none
	runs     uint64        // functions it ran inline (its own goroutine's)
	replaced atomic.Bool   // another goroutine now receives for it
	out      bool          // its goroutine left the worker's set (runInline)
	// uncounted: the frame being acted on is a protocol frame not yet
	// counted in the barrier's taken counts.
	uncounted bool

	// A receiver acting on a burst of frames corks its connection while
	// more of the burst is pending, so that the answers leave in one write
	// (fifo.Conn.Cork: tcp). corked says it holds a cork; it is released
	// once nothing is pending, when the receiver leaves, and when it
	// hands its connection off (a function that blocks must not hold
	// answers back). corks: the connection batches at all.
	corks  bool
	corked atomic.Bool

	// The watchdog's: the inline function it last saw, and for how many
	// ticks. Counting ticks instead of reading the clock keeps the clock
	// off the path of every call.
	seen      uint64
	seenTicks int
}

type receiverKey struct{}

// receivers is the watchdog's view of the worker's receiving goroutines.
type receivers struct {
	mu     sync.Mutex
	active map[*receiver]struct{}
	idle   atomic.Bool   // the watchdog waits for wake
	wake   chan struct{} // cap 1

	polling []atomic.Bool // index peer-1: a caller polls its connection
}

// startReceiver starts a goroutine receiving from peer from.
func (w *Worker) startReceiver(from core.WorkerID, conn *fifo.Conn) {
	r := &receiver{w: w, from: from, conn: conn, corks: conn.Corks()}
	r.ctx = context.WithValue(w.ctx, receiverKey{}, r)
	w.rx.mu.Lock()
	w.rx.active[r] = struct{}{}
	w.rx.mu.Unlock()
	if !w.gs.add() {
		w.rx.mu.Lock()
		delete(w.rx.active, r)
		w.rx.mu.Unlock()
		return
	}
	go r.loop()
}

// loop applies every frame the peer sends until the connection ends or
// another receiver has taken over.
func (r *receiver) loop() {
	w := r.w
	defer func() {
		if r.uncounted {
			// A function it ran inline called runtime.Goexit, after its
			// answer: the frame counts as taken for the shutdown barrier.
			w.bar.taken[r.from-1].Add(1)
		}
		if !r.out {
			w.gs.done()
		}
		w.rx.mu.Lock()
		delete(w.rx.active, r)
		w.rx.mu.Unlock()
	}()
	defer r.uncork()
	rd := w.readies.Get().(*core.Ready)
	defer w.readies.Put(rd)
	// Frames are received into pooled buffers: one no one refers to any
	// more takes the next frame, and one that carries a call's result
	// alone goes to its caller, who gives it back (effectsOf).
	var buf *[]byte
	defer func() {
		if buf != nil {
			putWireBuf(buf, nil, false)
		}
	}()
	for {
		if buf == nil {
			buf = getWireBuf()
		}
		frame, err := r.conn.Recv(w.ctx, (*buf)[:0])
		if err != nil {
			if !w.isClosed() {
				w.peerFailed(r.from, err)
			}
			return
		}
		if r.corks && !r.corked.Load() && r.conn.Pending() {
			r.conn.Cork()
			r.corked.Store(true)
		}
		protocol := w.takeFrame(r.from, frame, rd)
		r.uncounted = protocol
		inline := rd.Runs
		rest := *rd
		rest.Runs = nil
		// Results and values handed to other goroutines, and functions run
		// elsewhere, keep slices of the frame; a function run inline has
		// decoded its argument (a copy) and returned once runInline does.
		reuse := len(rest.Calls) == 0 && len(rest.Fetches) == 0
		var toCaller *[]byte
		if inBuffer(frame, *buf) && len(inline) == 0 {
			toCaller = buf
		} else if reuse && cap(frame) <= maxPooledFrame {
			*buf = frame[:0] // a frame grown past the buffer: keep the larger array
		}
		handedOff := w.effectsOf(rest, toCaller)
		for i, run := range inline {
			if i > 0 || r.replaced.Load() {
				w.spawn(run)
				reuse = false
				continue
			}
			if !r.runInline(run) {
				return // closed while the function ran
			}
		}
		if !reuse {
			buf = nil // the frame's bytes went on: to the caller, or to the collector
		}
		if protocol {
			w.bar.taken[r.from-1].Add(1)
		}
		r.uncounted = false
		if r.replaced.Load() {
			return
		}
		if r.corked.Load() && !r.conn.Pending() {
			r.uncork()
		}
		if handedOff {
			// The goroutine just handed a result sits in this processor's
			// run queue; let it run now rather than after this loop's next spin.
			runtime.Gosched()
		}
	}
}

// runInline runs a function on the receiving goroutine. The goroutine
// leaves the worker's set meanwhile, so Close does not wait for the
// function; it reports false when the worker closed meanwhile, and the
// goroutine must then end without touching the worker's set again.
func (r *receiver) runInline(run core.Run) bool {
	w := r.w
	w.running.Add(1)
	r.runs++
	r.inline.Store(r.runs)
	if w.rx.idle.Load() && w.rx.idle.CompareAndSwap(true, false) {
		w.rx.wake <- struct{}{}
	}
	// Out of the set for the function's duration (and for good if it
	// calls runtime.Goexit): counted again below, unless closing.
	r.out = true
	w.gs.done()
	w.execute(r.ctx, run)
	r.inline.Store(0)
	if !w.gs.add() {
		return false
	}
	r.out = false
	return true
}

// uncork releases the receiver's cork, if it holds one; a failed write is
// the connection's failure, which its next receive reports.
func (r *receiver) uncork() {
	if r.corked.CompareAndSwap(true, false) {
		r.conn.Uncork()
	}
}

// handOff gives r's connection to a new receiving goroutine, once, while r
// runs a function.
func (r *receiver) handOff(byWatchdog bool) {
	if r.inline.Load() != 0 && !r.w.isClosed() && r.replaced.CompareAndSwap(false, true) {
		r.uncork() // what it answered so far must not wait for its function
		if byWatchdog {
			r.w.stats.overruns.Add(1)
		} else {
			r.w.stats.handoffs.Add(1)
		}
		r.w.startReceiver(r.from, r.conn)
	}
}

// mayBlock is called before this package waits on behalf of a function:
// a function running on a receiver gives its connection away first.
func mayBlock(ctx context.Context) {
	if r, ok := ctx.Value(receiverKey{}).(*receiver); ok {
		r.handOff(false)
	}
}

// watchdog hands off the connections of functions that run past
// inlineLimit. It ticks only while functions run inline, and otherwise
// waits to be woken by the next one.
func (w *Worker) watchdog() {
	t := time.NewTicker(inlineLimit / 2)
	defer t.Stop()
	quiet := 0
	for {
		select {
		case <-w.ctx.Done():
			return
		case <-t.C:
		}
		if w.overrun() {
			quiet = 0
			continue
		}
		if quiet++; quiet < 8 {
			continue
		}
		// Nothing ran inline for a while: sleep until something does. A
		// function that started just before idle was set is seen by the
		// second look.
		quiet = 0
		w.rx.idle.Store(true)
		if w.anyInline() && w.rx.idle.CompareAndSwap(true, false) {
			continue
		}
		select {
		case <-w.ctx.Done():
			return
		case <-w.rx.wake:
		}
		t.Reset(inlineLimit / 2)
	}
}

// anyInline reports whether a function runs inline now.
func (w *Worker) anyInline() bool {
	w.rx.mu.Lock()
	defer w.rx.mu.Unlock()
	for r := range w.rx.active {
		if r.inline.Load() != 0 {
			return true
		}
	}
	return false
}

// overrun hands off the connections of functions seen running inline on
// three ticks in a row (two tick intervals: inlineLimit), and reports
// whether any function runs inline.
func (w *Worker) overrun() (busy bool) {
	var late []*receiver
	w.rx.mu.Lock()
	for r := range w.rx.active {
		n := r.inline.Load()
		if n == 0 {
			r.seen, r.seenTicks = 0, 0
			continue
		}
		busy = true
		if n != r.seen {
			r.seen, r.seenTicks = n, 0
		} else if r.seenTicks++; r.seenTicks >= 2 {
			late = append(late, r)
		}
	}
	w.rx.mu.Unlock()
	for _, r := range late {
		r.handOff(true)
	}
	return busy
}

// takeFrame applies one frame received from a peer and leaves in rd what
// the core produced. It reports whether it was a protocol frame (not a
// barrier report), which the caller counts as taken (w.bar.taken) once it
// has acted on all the frame produced.
func (w *Worker) takeFrame(from core.WorkerID, frame []byte, rd *core.Ready) bool {
	if len(frame) > 0 && frame[0] == groupwire.FrameVersion {
		rd.Reset()
		w.takeGroupFrame(from, frame)
		return false
	}
	w.countFrame(false, from, frame)
	w.mu.Lock()
	w.c.DeliverFrame(from, frame, nil)
	w.c.TakeReadyInto(rd)
	w.trackCalls(rd)
	w.mu.Unlock()
	return true
}

// beginPoll claims the right to read peer's connection on the calling
// goroutine (see pollFor) before a request goes out, so a quick reply costs
// the peer no wake-up call. One caller per peer polls at a time; the others
// wait to be handed their results. It returns nil when the caller should
// not poll.
func (w *Worker) beginPoll(peer core.WorkerID) *fifo.Conn {
	conn := w.conn(peer)
	if peer == w.id || conn == nil || !conn.Polls() {
		return nil
	}
	// With one processor, a caller spinning would keep the receiving
	// goroutine (or anything else) from running: wait to be handed the
	// result instead.
	if !w.multiProc.Load() {
		return nil
	}
	if !w.rx.polling[peer-1].CompareAndSwap(false, true) {
		return nil
	}
	conn.BeginPoll()
	return conn
}

func (w *Worker) endPoll(peer core.WorkerID, conn *fifo.Conn) {
	if conn != nil {
		conn.EndPoll()
		w.rx.polling[peer-1].Store(false)
	}
}

// pollFor reads peer's connection on the calling goroutine until done
// holds or nothing arrives for a spin budget (fifo.Conn.Poll): a caller
// takes its reply itself instead of being woken by the receiving goroutine,
// two goroutine switches less per round trip. Functions called meanwhile
// run on goroutines of their own, not on the caller's.
//
// Frames are copied into a buffer reused while nothing it held was handed
// on (a result, a value, a function's arguments keep slices of it). A
// frame whose one product is a call's result goes to its caller with the
// result, as from the receiving goroutine (effectsOf).
func (w *Worker) pollFor(ctx context.Context, peer core.WorkerID, conn *fifo.Conn, done func() bool) {
	buf := getWireBuf()
	var frame []byte
	take := func(p []byte) error {
		frame = append((*buf)[:0], p...)
		return nil
	}
	rd := w.readies.Get().(*core.Ready)
	defer w.readies.Put(rd)
	for !done() && ctx.Err() == nil {
		got, err := conn.Poll(take)
		if err != nil || !got {
			break // the receiving goroutine reports failures
		}
		protocol := w.takeFrame(peer, frame, rd)
		// A frame larger than the buffer was copied to a new array: the
		// buffer held nothing.
		inBuf := inBuffer(frame, *buf)
		var give *[]byte
		if inBuf {
			give = buf
		}
		if w.effectsOf(*rd, give) && inBuf {
			buf = getWireBuf() // the old one is read by whoever it went to
		}
		if protocol {
			w.bar.taken[peer-1].Add(1)
		}
	}
	putWireBuf(buf, nil, false)
}

// takeGroupFrame acts on a frame of the group protocol (spec/group.rspec):
// a peer's readiness or barrier report. Anything else there is a peer's
// mistake, logged and dropped.
func (w *Worker) takeGroupFrame(from core.WorkerID, frame []byte) {
	m, err := groupwire.Decode(frame, nil) // rare: a shared Decoder would need a lock
	switch m := m.(type) {
	case *groupwire.Ready:
		w.peerReady(from)
	case *groupwire.BarrierReport:
		w.takeBarrier(from, m)
	case *groupwire.Fence:
		w.takeFence(from, m)
	default:
		if err == nil {
			err = fmt.Errorf("unexpected %v frame", m.MessageCode())
		}
		w.cfg.Logger.Warn("rref group frame", "worker", w.name, "from", w.nameOf(from), "err", err)
	}
}
