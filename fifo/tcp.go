package fifo

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"reflect"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// TCP frames. A put carries one message for the receiver to apply to its local
// image of the sender's ring; credits and rendezvous chunks travel beside the
// ring and never need ring credits.
//
// The frames, little endian, at fixed offsets (the put is on every
// message's path: fixed fields cost a load each, where the spec
// language's varints would cost a loop):
//
//	put     0 type | 1 pos u64 | 9 seq u32 | 13 len u32 | 17 credit u32 | 21 kind | 22 flags | 23 payload
//	credit  0 type | 1 consumed u64 | 9
//	bulk    0 type | 1 id u32 | 5 total u32 | 9 off u32 | 13 n u32 | 17 data
//	close   0 type | 1
//	finish  0 type | 1 id u32 | 5
//	abort   0 type | 1 id u32 | 5
const (
	framePut    = 1
	frameCredit = 2
	frameBulk   = 3
	frameClose  = 4
	frameFinish = 5 // the receiver copied a rendezvous payload out; its slot is free
	frameAbort  = 6 // the sender gave a rendezvous payload up before its request: drop what came of it

	putPos, putSeq, putLength, putCredit, putKind, putFlags, putHeader = 1, 9, 13, 17, 21, 22, 23
	creditConsumed, creditFrame                                        = 1, 9
	bulkID, bulkTotal, bulkOff, bulkLen, bulkHeader                    = 1, 5, 9, 13, 17
	finishID, finishFrame                                              = 1, 5

	bulkChunk = 256 << 10
)

type tcpLink struct {
	cfg Config
	// w is the connection frames travel over now; a resumed link replaces
	// it (resume.go). Readers and writers load it holding their role.
	w   atomic.Pointer[wire]
	img *ring // the local image of the peer's ring, which Recv reads
	// rxPos is how far the local receiver consumed: a put beyond the
	// credits it was given is a protocol violation.
	rxPos func() uint64

	txCred atomic.Uint64

	wmu     sync.Mutex
	wcond   sync.Cond // on wmu: the writer role was given up
	wbuf    []byte
	spare   []byte
	writing bool
	// closing: Close is writing its last frames, and nothing more is
	// queued (a put then fails with ErrClosed). closeOut: the close frame
	// has gone, and Close keeps the writer role for good.
	closing, closeOut bool

	// The read side has no goroutine of its own: whoever needs progress (a
	// receiver waiting for a message, a sender waiting for credits or a
	// rendezvous slot) takes the reader role and applies frames until its
	// condition holds, so a message reaches its receiver with no hand-off.
	rsem     chan struct{}                 // the reader role
	idle     sync.WaitGroup                // idleDrains, on a non-resumable link
	waiters  atomic.Int32                  // callers waiting for someone else's progress
	prog     atomic.Pointer[chan struct{}] // closed at each progress while someone waits
	ctxWatch *ctxWatch                     // the reader's context, watched (the reader role's)
	corks    atomic.Int32                  // Cork calls not yet matched by Uncork
	br       *bufio.Reader
	nextPos  uint64
	nextSeq  uint32

	slots    chan struct{} // rendezvous transfers this end may have outstanding
	bmu      sync.Mutex
	nextBulk uint32
	out      map[uint32]*outBulk // rendezvous payloads sent, until their finish
	assembly map[uint32][]byte   // rendezvous payloads being received
	// viewing is the rendezvous payload a receiver reads in place, between
	// bulkView and bulkFree, while isViewing (under bmu): no abort may drop it.
	viewing   uint32
	isViewing bool
	pool      [][]byte // buffers of finished ones, for reuse

	// A resumable link (both ends keep the session) survives a broken
	// connection: it keeps what the peer may not have received (the tx
	// image and the rendezvous payloads out), and resume.go restores it
	// over a new connection. res is nil otherwise.
	res   *resumer
	txImg *ring  // a copy of the puts this end sent, at their positions (under wmu)
	txEnd uint64 // the position after the last put (under wmu)

	linkEnd
	done      chan struct{} // closed by shutdown
	closeOnce sync.Once
}

// wire is one tcp connection of a link: nc carries the frames, over raw
// (the same, or TLS over it).
type wire struct {
	nc, raw net.Conn
	gen     uint64 // how many connections the link had before this one
}

// outBulk is a rendezvous payload sent and not yet finished by the peer.
type outBulk struct {
	data   []byte // a copy, kept to send again after a break (resumable links)
	pos    uint64 // where its request was put, once placed
	placed bool
	resent bool // a resume sent it whole: its sender must not go on with chunks
}

func (l *tcpLink) setDead(err error) {
	l.deadErr.CompareAndSwap(nil, &err)
}

// queueing reports whether frames may be queued (under wmu): not while
// the link is down (a resume regenerates them) nor once Close has written
// its last.
func (l *tcpLink) queueing() bool { return !l.closing && !l.isDown() }

func (l *tcpLink) put(pos uint64, h header, payload []byte) error {
	l.wmu.Lock()
	if l.closing {
		l.wmu.Unlock()
		return ErrClosed // the close frame has gone: this put would never leave
	}
	if l.txImg != nil {
		l.keepPut(pos, h, payload)
	}
	if !l.isDown() {
		l.wbuf = appendPut(l.wbuf, pos, h, payload)
	}
	l.wmu.Unlock()
	return nil
}

func appendPut(b []byte, pos uint64, h header, payload []byte) []byte {
	b = append(b, framePut)
	b = binary.LittleEndian.AppendUint64(b, pos)
	b = binary.LittleEndian.AppendUint32(b, h.seq)
	b = binary.LittleEndian.AppendUint32(b, h.length)
	b = binary.LittleEndian.AppendUint32(b, h.credit)
	b = append(b, h.kind, h.flags)
	return append(b, payload...)
}

func appendBulk(b []byte, id uint32, total, off int, chunk []byte) []byte {
	b = append(b, frameBulk)
	b = binary.LittleEndian.AppendUint32(b, id)
	b = binary.LittleEndian.AppendUint32(b, uint32(total))
	b = binary.LittleEndian.AppendUint32(b, uint32(off))
	b = binary.LittleEndian.AppendUint32(b, uint32(len(chunk)))
	return append(b, chunk...)
}

func appendCredit(b []byte, consumed uint64) []byte {
	return binary.LittleEndian.AppendUint64(append(b, frameCredit), consumed)
}

func appendFinish(b []byte, id uint32) []byte {
	return binary.LittleEndian.AppendUint32(append(b, frameFinish), id)
}

// appendAbort has the finish's layout.
func appendAbort(b []byte, id uint32) []byte {
	return binary.LittleEndian.AppendUint32(append(b, frameAbort), id)
}

// flushTx writes queued frames, unless the link is corked (Conn.Cork):
// then they wait for the cork's release, or for a reader about to block.
func (l *tcpLink) flushTx() error {
	if l.corks.Load() > 0 {
		return l.failed()
	}
	return l.flushNow()
}

// flushNow writes queued frames, corked or not. Whoever finds no write in
// progress becomes the writer and keeps writing until the queue is empty,
// so frames queued by other senders meanwhile leave together in one
// write: pipelining.
func (l *tcpLink) flushNow() error {
	l.wmu.Lock()
	if l.writing || len(l.wbuf) == 0 {
		l.wmu.Unlock()
		return l.failed()
	}
	l.writing = true
	for len(l.wbuf) > 0 {
		b := l.wbuf
		l.wbuf = l.spare[:0]
		w := l.w.Load()
		l.wmu.Unlock()
		_, err := w.nc.Write(b)
		l.wmu.Lock()
		l.spare = b[:0]
		if err != nil {
			l.leaveWriter()
			l.wmu.Unlock()
			return l.writeFailed(w, err)
		}
	}
	l.leaveWriter()
	l.wmu.Unlock()
	return nil
}

// writeFailed handles a failed write on w. A peer that closed may still
// have frames in the socket: its last messages and its close frame, ahead
// of the reset that failed this write (it closed with our credits unread).
// Read, they end the link as the peer meant, closed, with everything it
// sent delivered; judged from the write alone, the link would break, and
// a resumable one would wait DeadAfter for a re-dial that never comes. So
// the failure goes through the read side, as the watch's read of an idle
// socket does (readWhileIdle): this writer reads what the socket holds if
// no one else reads, bounded by watchEvery, and leaves it to the reader otherwise,
// who meets the same failure after the same frames. A resumable link sends
// again what this write lost, once resumed.
func (l *tcpLink) writeFailed(w *wire, err error) error {
	werr := fmt.Errorf("%w: %v", ErrPeerDead, err)
	if l.closed.Load() || l.peerClosed.Load() {
		return l.broke(w, werr)
	}
	if ne := net.Error(nil); errors.As(err, &ne) && ne.Timeout() {
		// Close's deadline cut a write at an unknown byte of a healthy
		// connection: nothing may follow on w, or the peer would read on
		// from the middle of a frame. A resumable link resumes over a new
		// one; any other is dead.
		w.nc.Close()
		return l.broke(w, werr)
	}
	if !l.readWhileIdle(w) {
		return nil // the reader (perhaps this goroutine) meets the failure
	}
	return l.broke(w, werr) // when reading did not end the link, the write did
}

// leaveWriter gives up the writer role (under wmu); a resume or Close may
// wait for it.
func (l *tcpLink) leaveWriter() {
	l.writing = false
	l.wcond.Broadcast()
}

func (l *tcpLink) txConsumed() uint64 { return l.txCred.Load() }
func (l *tcpLink) rx() *ring          { return l.img }

func (l *tcpLink) returnCredits(v uint64) error {
	l.wmu.Lock()
	if l.queueing() { // a resume sends the latest
		l.wbuf = appendCredit(l.wbuf, v)
	}
	l.wmu.Unlock()
	return l.flushTx()
}

// announce wakes the callers waiting for progress, if any.
func (l *tcpLink) announce() {
	if l.waiters.Load() == 0 {
		return
	}
	ch := make(chan struct{})
	close(*l.prog.Swap(&ch))
}

// waitFor makes progress until cond holds: it reads frames itself when no
// one else is reading, and otherwise waits for the reader's progress. It
// returns nil right after cond returned true, and never asks cond again.
func (l *tcpLink) waitFor(ctx context.Context, cond func() bool) error {
	for {
		if cond() {
			return nil
		}
		if err := l.failed(); err != nil {
			return err
		}
		l.waiters.Add(1)
		progress := *l.prog.Load()
		if cond() {
			l.waiters.Add(-1)
			return nil
		}
		if l.corks.Load() > 0 {
			// About to wait for the peer (credits, a rendezvous slot, a
			// message) while another goroutine may sit in a blocking read:
			// what is held back may be what the peer waits for.
			if err := l.flushNow(); err != nil {
				l.waiters.Add(-1)
				return err
			}
		}
		reader := l.rsem
		if l.isDown() {
			reader = nil // no one reads until the link is resumed (announced)
		}
		select {
		case reader <- struct{}{}:
			l.waiters.Add(-1)
			err := l.readUntil(ctx, cond)
			<-l.rsem
			l.announce() // a waiter may take over the reader role
			if err == errResuming {
				continue
			}
			// readUntil returns nil only once cond held; cond may have had an
			// effect (taking a rendezvous slot), so it is not asked again.
			return err
		case <-progress:
			l.waiters.Add(-1)
		case <-ctx.Done():
			l.waiters.Add(-1)
			return ctx.Err()
		case <-l.done:
			l.waiters.Add(-1)
			return l.failed()
		}
	}
}

// readUntil applies frames until cond holds (holding the reader role).
// Frames already buffered are applied without blocking; a read deadline is
// armed only when the reader must block and ctx can end at all.
func (l *tcpLink) readUntil(ctx context.Context, cond func() bool) error {
	return l.readUntilFlushing(ctx, cond, true)
}

// readUntilFlushing is readUntil; with flush false it leaves writes held
// back by Cork held, for a reader that waits for no one (drainIdle): the
// drain is not a receiver about to wait, and it would become the writer of
// everything held, holding the reader role for as long as that takes.
func (l *tcpLink) readUntilFlushing(ctx context.Context, cond func() bool, flush bool) error {
	if l.closed.Load() {
		return l.failed()
	}
	w := l.w.Load() // stable while this goroutine holds the reader role
	if ctx.Done() == nil {
		// A watch kept from a reader whose context has since ended may
		// have moved the deadline into the past: with no context to
		// watch, this read would time out at once.
		l.dropWatch(w)
	}
	armed := false
	defer func() {
		if armed {
			w.nc.SetReadDeadline(time.Time{})
		}
	}()
	for {
		for l.frameBuffered() {
			if err := l.readFrame(); err != nil {
				return l.readFailed(w, err)
			}
			l.announce()
		}
		if cond() {
			return nil
		}
		if flush && l.corks.Load() > 0 {
			// About to wait for the peer: what is held back may be what
			// it waits for (credits, a finish, an answer).
			if err := l.flushNow(); err != nil {
				return err
			}
		}
		if !armed && ctx.Done() != nil {
			if dl, ok := ctx.Deadline(); ok {
				l.dropWatch(w)
				w.nc.SetReadDeadline(dl)
				armed = true
			} else if err := l.watchCtx(ctx, w); err != nil {
				return err
			}
		}
		err := l.readFrame()
		if err == nil {
			l.announce()
			continue
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() && !l.closed.Load() && !l.isDown() {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return context.DeadlineExceeded
		}
		return l.readFailed(w, err)
	}
}

// ctxWatch ends a blocked socket read when the reader's context ends,
// by moving the read deadline into the past. A reader's context is nearly
// always the one it had last time (a worker receives with its own for its
// whole life), so a watch is made once per context and kept between reads:
// a context.AfterFunc per read cost three allocations, and every call two
// reads. Only the reader role's holder touches the link's watch.
type ctxWatch struct {
	ctx   context.Context
	stop  func() bool
	fired chan struct{} // closed once the deadline is set, on firedOn
	// firedOn is the connection the deadline went to (the link's then),
	// written before fired is closed.
	firedOn *wire
}

// watchCtx makes sure a watch for ctx (which can end and has no deadline)
// is in place before a read from w blocks, and returns ctx's error if it
// has already ended.
func (l *tcpLink) watchCtx(ctx context.Context, w *wire) error {
	if l.ctxWatch != nil && sameContext(l.ctxWatch.ctx, ctx) {
		select {
		case <-l.ctxWatch.fired:
			return ctx.Err() // the deadline stays: this reader stops too
		default:
			return nil
		}
	}
	l.dropWatch(w)
	if err := ctx.Err(); err != nil {
		return err
	}
	cw := &ctxWatch{ctx: ctx, fired: make(chan struct{})}
	cw.stop = context.AfterFunc(ctx, func() {
		cw.firedOn = l.w.Load()
		cw.firedOn.nc.SetReadDeadline(time.Unix(1, 0))
		close(cw.fired)
	})
	l.ctxWatch = cw
	return nil
}

// dropWatch removes the link's watch, if any, before a read from w that
// another context governs: a watch that fired has its past deadline
// cleared, so that it cannot end a read it does not govern.
func (l *tcpLink) dropWatch(w *wire) {
	cw := l.ctxWatch
	if cw == nil {
		return
	}
	l.ctxWatch = nil
	if cw.stop() {
		return
	}
	<-cw.fired // the callback runs on its own goroutine: wait for its write
	cw.firedOn.nc.SetReadDeadline(time.Time{})
	if w != nil {
		w.nc.SetReadDeadline(time.Time{})
	}
}

// sameContext compares contexts as the watch needs, without the panic ==
// gives two values of one incomparable type.
func sameContext(a, b context.Context) bool {
	ta := reflect.TypeOf(a)
	return ta == reflect.TypeOf(b) && ta.Comparable() && a == b
}

// cork holds back writes until the matching uncork (Conn.Cork).
func (l *tcpLink) cork() { l.corks.Add(1) }

// uncork releases one cork; the last writes what was held back.
func (l *tcpLink) uncork() error {
	if l.corks.Add(-1) > 0 {
		return l.failed()
	}
	return l.flushNow()
}

// applyBuffered applies the frames already read from the socket, if no one
// else holds the reader role, without waiting for more.
func (l *tcpLink) applyBuffered() {
	select {
	case l.rsem <- struct{}{}:
	default:
		return // the reader applies them
	}
	for !l.closed.Load() && !l.isDown() && l.frameBuffered() {
		if err := l.readFrame(); err != nil {
			l.readFailed(l.w.Load(), err)
			break
		}
		l.announce()
	}
	<-l.rsem
}

// errResuming tells a reader that its connection broke and a resume is
// under way: it waits for the resume like any other waiter.
var errResuming = errors.New("fifo: resuming")

// readFailed records why reading from w stopped and closes it. A
// resumable link's broken connection is restored instead (errResuming).
func (l *tcpLink) readFailed(w *wire, err error) error {
	switch {
	case l.closed.Load() || l.peerClosed.Load():
	case errors.Is(err, ErrCorrupt):
		l.setDead(err)
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed):
		err = fmt.Errorf("%w: connection lost", ErrPeerDead)
	default:
		err = fmt.Errorf("%w: %v", ErrPeerDead, err)
	}
	if l.broke(w, err) == nil {
		return errResuming
	}
	w.nc.Close()
	l.announce()
	return l.failed()
}

// frameBuffered reports whether a whole frame is already in the read buffer
// (or a malformed one, which readFrame then reports without blocking).
func (l *tcpLink) frameBuffered() bool {
	n := l.br.Buffered()
	if n == 0 {
		return false
	}
	b, _ := l.br.Peek(n)
	need := 0
	switch b[0] {
	case framePut:
		if n < putHeader {
			return false
		}
		need = putHeader
		if b[putKind] != kindPad {
			need += int(binary.LittleEndian.Uint32(b[putLength:]))
		}
	case frameCredit:
		need = creditFrame
	case frameBulk:
		if n < bulkHeader {
			return false
		}
		need = bulkHeader + int(binary.LittleEndian.Uint32(b[bulkLen:]))
	case frameFinish, frameAbort:
		need = finishFrame
	default:
		return true
	}
	if need > l.br.Size() {
		return true // too large to ever buffer: readFrame rejects it
	}
	return n >= need
}

// readFrame applies one frame. It only peeks until the whole frame is
// buffered, so a read deadline in the middle of a frame loses nothing.
func (l *tcpLink) readFrame() error {
	b, err := l.br.Peek(1)
	if err != nil {
		return err
	}
	switch b[0] {
	case framePut:
		hdr, err := l.br.Peek(putHeader)
		if err != nil {
			return err
		}
		pos := binary.LittleEndian.Uint64(hdr[putPos:])
		h := header{seq: binary.LittleEndian.Uint32(hdr[putSeq:]), length: binary.LittleEndian.Uint32(hdr[putLength:]),
			credit: binary.LittleEndian.Uint32(hdr[putCredit:]), kind: hdr[putKind], flags: hdr[putFlags]}
		if pos != l.nextPos || h.seq != l.nextSeq {
			return &CorruptError{Cell: pos, Why: fmt.Sprintf("sequence gap: put %d at cell %d, expected %d at %d", h.seq, pos, l.nextSeq, l.nextPos)}
		}
		if h.length > maxLength || h.credit > creditMask || h.flags > flagCredit {
			return &CorruptError{Cell: pos, Why: "header field out of range"}
		}
		if err := l.img.validate(pos, h, l.cfg.EagerLimit); err != nil {
			return err
		}
		n := h.cells()
		if pos+n-l.rxPos() > l.img.cells {
			return &CorruptError{Cell: pos, Why: "the sender overran its credits"}
		}
		body := 0
		if h.kind != kindPad {
			body = int(h.length)
		}
		frame, err := l.br.Peek(putHeader + body)
		if err != nil {
			return err
		}
		l.img.place(pos, h, frame[putHeader:])
		l.img.publish(pos, h)
		l.br.Discard(putHeader + body)
		l.nextPos, l.nextSeq = pos+n, seqAfter(l.nextSeq)
	case frameCredit:
		f, err := l.br.Peek(creditFrame)
		if err != nil {
			return err
		}
		v := binary.LittleEndian.Uint64(f[creditConsumed:])
		l.br.Discard(creditFrame)
		for old := l.txCred.Load(); v > old && !l.txCred.CompareAndSwap(old, v); old = l.txCred.Load() {
		}
	case frameBulk:
		hdr, err := l.br.Peek(bulkHeader)
		if err != nil {
			return err
		}
		id, total := binary.LittleEndian.Uint32(hdr[bulkID:]), binary.LittleEndian.Uint32(hdr[bulkTotal:])
		off, n := binary.LittleEndian.Uint32(hdr[bulkOff:]), binary.LittleEndian.Uint32(hdr[bulkLen:])
		if n > bulkChunk {
			return &CorruptError{Why: fmt.Sprintf("rendezvous chunk of %d bytes", n)}
		}
		l.bmu.Lock()
		buf, ok := l.assembly[id]
		inFlight := len(l.assembly)
		l.bmu.Unlock()
		if !ok && (int(total) > l.cfg.MaxMessage || inFlight >= l.cfg.BulkSlots || off != 0) {
			return &CorruptError{Why: fmt.Sprintf("rendezvous %d of %d bytes exceeds the limits", id, total)}
		}
		if ok && (int(off) != len(buf) || uint64(off)+uint64(n) > uint64(total) || cap(buf) != int(total)) {
			return &CorruptError{Why: fmt.Sprintf("rendezvous %d chunk at %d of %d bytes is out of order", id, off, n)}
		}
		if !ok && n > total {
			return &CorruptError{Why: fmt.Sprintf("rendezvous %d chunk larger than the whole", id)}
		}
		frame, err := l.br.Peek(bulkHeader + int(n))
		if err != nil {
			return err
		}
		if !ok {
			l.bmu.Lock()
			for i, p := range l.pool {
				if cap(p) >= int(total) {
					buf = p[:0:total]
					l.pool = append(l.pool[:i], l.pool[i+1:]...)
					break
				}
			}
			l.bmu.Unlock()
			if buf == nil {
				buf = make([]byte, 0, total)
			}
		}
		buf = append(buf, frame[bulkHeader:]...)
		l.br.Discard(bulkHeader + int(n))
		l.bmu.Lock()
		l.assembly[id] = buf
		l.bmu.Unlock()
	case frameFinish:
		f, err := l.br.Peek(finishFrame)
		if err != nil {
			return err
		}
		id := binary.LittleEndian.Uint32(f[finishID:])
		l.br.Discard(finishFrame)
		if !l.finished(id) {
			return &CorruptError{Why: fmt.Sprintf("finish for rendezvous %d, which is not out", id)}
		}
	case frameAbort:
		f, err := l.br.Peek(finishFrame)
		if err != nil {
			return err
		}
		id := binary.LittleEndian.Uint32(f[finishID:])
		l.br.Discard(finishFrame)
		l.bmu.Lock()
		b, ok := l.assembly[id]
		taken := ok && l.isViewing && l.viewing == id
		if ok && !taken {
			delete(l.assembly, id)
			if len(l.pool) < l.cfg.BulkSlots {
				l.pool = append(l.pool, b[:0])
			}
		}
		l.bmu.Unlock()
		if !ok {
			// Its first chunk goes before it, and a resume asks to drop
			// only what this end reported holding.
			return &CorruptError{Why: fmt.Sprintf("abort of rendezvous %d, of which nothing came", id)}
		}
		if taken {
			// A sender gives a payload up only before its request: this
			// one's was taken, and a receiver reads it in place.
			return &CorruptError{Why: fmt.Sprintf("abort of rendezvous %d, which is being received", id)}
		}
	case frameClose:
		l.br.Discard(1)
		l.peerClosed.Store(true)
	default:
		return &CorruptError{Why: fmt.Sprintf("unknown frame type %d", b[0])}
	}
	return nil
}

// Over tcp, parking is reading the socket: no one needs waking.
func (l *tcpLink) polling(bool) {}
func (l *tcpLink) wakeSelf()    {}

func (l *tcpLink) wakeUps() uint64 { return 0 }

func (l *tcpLink) park(ctx context.Context, pos uint64, seq uint32, _ bool) error {
	return l.waitFor(ctx, func() bool {
		_, ok := l.img.peek(pos, seq)
		return ok || l.peerClosed.Load()
	})
}

func (l *tcpLink) waitTx(ctx context.Context, cond func() bool) error {
	return l.waitFor(ctx, func() bool { return cond() || l.peerClosed.Load() })
}

func (l *tcpLink) bulkPut(ctx context.Context, p []byte) (uint32, error) {
	err := l.waitFor(ctx, func() bool {
		select {
		case l.slots <- struct{}{}:
			return true
		default:
			return l.peerClosed.Load()
		}
	})
	if err == nil {
		err = l.failed()
	}
	if err == nil {
		// waitFor takes a free slot even for a context already done: give
		// it back before anything of the payload leaves.
		err = ctx.Err()
		if err != nil {
			<-l.slots
		}
	}
	if err != nil {
		return 0, err
	}
	o := &outBulk{}
	if l.res != nil {
		o.data = l.keepBulk(p) // before it is out: a resume may send it whole
	}
	l.wmu.Lock()
	l.bmu.Lock()
	l.nextBulk++
	id := l.nextBulk
	l.out[id] = o
	l.bmu.Unlock()
	l.wmu.Unlock()
	for off := 0; ; off += bulkChunk {
		chunk := p[off:min(off+bulkChunk, len(p))]
		l.wmu.Lock()
		if l.queueing() && !o.resent {
			l.wbuf = appendBulk(l.wbuf, id, len(p), off, chunk)
		}
		l.wmu.Unlock()
		// Flush per chunk, so small messages queued meanwhile go between chunks.
		if err := l.flushTx(); err != nil {
			return 0, err
		}
		if off+bulkChunk >= len(p) {
			return id, nil
		}
		if err := ctx.Err(); err != nil {
			if aerr := l.abortBulk(id); aerr != nil {
				return 0, aerr
			}
			return 0, err
		}
	}
}

// abortBulk gives up rendezvous id, of which chunks have left, before its
// request: the peer drops what it holds of it (an abort frame; if the
// link is down, the resume's, as the peer reports holding it), and its
// slot is free at once, as the abort goes before any later chunk. Giving
// up without a word, a Send left the slot out and half a payload at the
// peer for good. It returns ErrClosed if the link closed meanwhile, else
// nil: the caller reports its context's end.
func (l *tcpLink) abortBulk(id uint32) error {
	l.wmu.Lock()
	if l.queueing() {
		l.wbuf = appendAbort(l.wbuf, id)
	}
	l.bmu.Lock()
	if o, ok := l.out[id]; ok {
		delete(l.out, id)
		if l.res != nil {
			l.recycle(o.data)
		}
		select {
		case <-l.slots:
		default:
		}
	}
	l.bmu.Unlock()
	l.wmu.Unlock()
	return l.flushTx()
}

// finished records the peer's finish of rendezvous id: its slot is free.
// It reports false for an id that is not out.
func (l *tcpLink) finished(id uint32) bool {
	l.bmu.Lock()
	o, ok := l.out[id]
	if ok {
		delete(l.out, id)
		l.recycle(o.data)
	}
	l.bmu.Unlock()
	if !ok {
		return false
	}
	select {
	case <-l.slots:
		return true
	default:
		return false
	}
}

// keepBulk copies p for a resume, in a buffer of a finished transfer if
// one is large enough.
func (l *tcpLink) keepBulk(p []byte) []byte {
	l.bmu.Lock()
	var buf []byte
	for i, b := range l.res.bulkPool {
		if cap(b) >= len(p) {
			buf = b[:len(p)]
			l.res.bulkPool = append(l.res.bulkPool[:i], l.res.bulkPool[i+1:]...)
			break
		}
	}
	l.bmu.Unlock()
	if buf == nil {
		buf = make([]byte, len(p))
	}
	copy(buf, p)
	return buf
}

// recycle keeps the copy of a finished transfer for the next (under bmu).
func (l *tcpLink) recycle(b []byte) {
	if b != nil && len(l.res.bulkPool) < l.cfg.BulkSlots {
		l.res.bulkPool = append(l.res.bulkPool, b[:0])
	}
}

func (l *tcpLink) bulkView(id uint32, n uint32) ([]byte, error) {
	l.bmu.Lock()
	defer l.bmu.Unlock()
	b, ok := l.assembly[id]
	if !ok || len(b) != int(n) {
		return nil, &CorruptError{Why: fmt.Sprintf("rendezvous %d of %d bytes was not received", id, n)}
	}
	l.viewing, l.isViewing = id, true
	return b, nil
}

// bulkFree drops the assembled payload, keeping its buffer for the next one,
// and sends the finish.
func (l *tcpLink) bulkFree(id uint32) error {
	// Under wmu: a resume reports the payloads still held and clears the
	// frames queued before, in one step (resume.go), so a finish is either
	// sent or implied by the report.
	l.wmu.Lock()
	l.bmu.Lock()
	l.isViewing = false
	if b, ok := l.assembly[id]; ok {
		delete(l.assembly, id)
		if len(l.pool) < l.cfg.BulkSlots {
			l.pool = append(l.pool, b[:0])
		}
	}
	l.bmu.Unlock()
	if !l.closing {
		l.wbuf = appendFinish(l.wbuf, id)
	}
	l.wmu.Unlock()
	return l.flushTx()
}

func (l *tcpLink) cheapCredits() bool { return false }
func (l *tcpLink) cheapPolls() bool   { return false }

func (l *tcpLink) checkPeer() error { return l.failed() }

// spin: a tcp receiver's data arrives only when someone reads the socket,
// which the waiter does itself; polling the image first is a cheap check.
func (l *tcpLink) spin(configured int) int { return min(configured, 64) }

// linkEnd is how a link with a connection of its own ended, if it has
// (tcp, fabric): closed here, dead, or closed by the peer.
type linkEnd struct {
	closed     atomic.Bool
	peerClosed atomic.Bool
	deadErr    atomic.Pointer[error]
}

// failed reports a closed or failed link, cheaply: this end's close first,
// then a death, then the peer's close.
func (e *linkEnd) failed() error {
	if e.closed.Load() {
		return ErrClosed
	}
	if p := e.deadErr.Load(); p != nil {
		return *p
	}
	if e.peerClosed.Load() {
		return errPeerClosed
	}
	return nil
}

// closeWait bounds how long Close tries to tell the peer: a close frame
// that cannot leave in this time is not worth waiting for, since the peer
// notices the closed socket anyway.
const closeWait = 100 * time.Millisecond

func (l *tcpLink) shutdown() {
	l.closeOnce.Do(func() {
		// A break may meet the close: a resumable link then resumes, bounded
		// by closeWait, and says it closed over the new connection.
		for try := 0; try < closeTries; try++ {
			if l.isDown() {
				l.awaitResume(time.Now().Add(closeWait))
			}
			if l.failed() != nil || l.isDown() {
				break
			}
			w, err := l.sayClose()
			if err == nil || l.res == nil {
				break
			}
			if !errors.Is(err, errBrokeBeforeClose) {
				l.writeFailed(w, err) // the peer's own close may be what reset it
			}
		}
		l.stopResuming() // before closed is set: a resume stops at once
		l.closed.Store(true)
		l.w.Load().nc.Close()
		close(l.done)
	})
}

// errBrokeBeforeClose: the connection broke before Close could write its
// close frame, and a resume is under way.
var errBrokeBeforeClose = errors.New("fifo: the connection broke before the close frame left")

// closeTries bounds how many connections Close says it closed over: one,
// and one more after a break that met the first.
const closeTries = 2

// awaitResume waits, until deadline, for a resume under way to restore
// the link, so that Close can still say it closed: the frames the break
// lost leave first, and the peer sees a close rather than a break, which
// an accepted end would wait DeadAfter to see resumed, and a dialed one
// would find refused. A network still down by then is given up.
func (l *tcpLink) awaitResume(deadline time.Time) {
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	for {
		l.waiters.Add(1) // announce closes progress only for waiters
		progress := *l.prog.Load()
		if !l.isDown() || l.failed() != nil {
			l.waiters.Add(-1)
			return
		}
		select {
		case <-progress:
			l.waiters.Add(-1)
		case <-t.C:
			l.waiters.Add(-1)
			return
		}
	}
}

// sayClose writes the frames still queued and then the close frame, as
// the link's last writer, and waits until the kernel has sent them; it
// returns the connection it wrote to, and an error if that broke first.
// Another goroutine may be writing: the close frame must follow its write,
// not cut it off with a closed socket. And a socket closed with the peer's
// frames unread (credits, say) sends a reset, which makes the kernel drop
// what it has not yet sent: the close frame itself, when the peer reads
// slowly. Either way the peer would see a break, not a close, and a
// resumable peer would wait DeadAfter for a re-dial that never comes. All
// of it is bounded by closeWait.
func (l *tcpLink) sayClose() (*wire, error) {
	deadline := time.Now().Add(closeWait)
	l.w.Load().nc.SetWriteDeadline(deadline) // also ends a writer stuck on a full socket
	l.wmu.Lock()
	l.closing = true
	for l.writing {
		l.wcond.Wait()
	}
	w := l.w.Load()                      // a resume may have replaced it meanwhile
	if l.isDown() || l.failed() != nil { // the writer met a break
		l.wmu.Unlock()
		if l.failed() == nil {
			return w, errBrokeBeforeClose // shutdown awaits the resume and says it then
		}
		return w, nil
	}
	w.nc.SetWriteDeadline(deadline)
	l.writing = true
	b := append(l.wbuf, frameClose)
	l.wbuf = nil
	l.wmu.Unlock()
	_, err := w.nc.Write(b)
	if err == nil {
		err = finishWrites(w.raw, deadline)
	}
	l.wmu.Lock()
	if err != nil {
		l.leaveWriter() // for a resume, which sends again what was lost
	} else {
		l.closeOut = true   // the writer role is kept: nothing follows the close frame
		l.wcond.Broadcast() // a resume waiting for the role gives up
	}
	l.wmu.Unlock()
	return w, err
}

func (l *tcpLink) release(*Conn) error { // the image ring is Go memory
	l.shutdown()
	l.rsem <- struct{}{} // wait for a reader in progress to leave
	l.dropWatch(nil)     // its context no longer keeps the link reachable
	if l.res != nil {
		l.res.bg.Wait() // and for a resume in progress
	}
	l.idle.Wait()
	return nil
}

// newTCPLink makes a connection over nc; res, when not nil, makes it
// resumable (resume.go).
func newTCPLink(nc net.Conn, cfg Config, res *resumer) *Conn {
	return newTCPLinkOn(&wire{nc: nc, raw: nc}, cfg, res)
}

// prepare sets up a new wire's tcp connection: no delay, and the
// liveness bound.
func (w *wire) prepare(cfg Config) {
	if tc, ok := w.raw.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
		watchLiveness(tc, cfg)
	}
}

func newTCPLinkOn(w *wire, cfg Config, res *resumer) *Conn {
	w.prepare(cfg)
	nc := w.nc
	img, _ := newRing(alignedBytes(ringSize(cfg.Cells)), cfg.Cells)
	size := max(putHeader+cfg.EagerLimit, bulkHeader+bulkChunk) + 64
	l := &tcpLink{cfg: cfg, img: img, assembly: map[uint32][]byte{}, out: map[uint32]*outBulk{}, done: make(chan struct{}),
		slots: make(chan struct{}, cfg.BulkSlots), rsem: make(chan struct{}, 1), br: bufio.NewReaderSize(newSpinReader(nc, cfg.SocketSpin), size), nextSeq: 1}
	l.w.Store(w)
	l.wcond.L = &l.wmu
	ch := make(chan struct{})
	l.prog.Store(&ch)
	if res != nil {
		l.res = res
		l.txImg, _ = newRing(alignedBytes(ringSize(cfg.Cells)), cfg.Cells)
		res.link = l
	}
	c := newConn(l, cfg)
	l.rxPos = c.rxDone.Load
	if res != nil {
		res.bg.Add(1)
		go l.watch()
	} else if drainsIdle {
		// Stopped by Close, or once the Conn is dropped without it: the
		// goroutine holds the link, not the Conn.
		l.idle.Add(1)
		dropped := make(chan struct{})
		runtime.AddCleanup(c, func(ch chan struct{}) { close(ch) }, dropped)
		go l.idleDrains(dropped)
	}
	return c
}

// drainEvery is how often an end's socket is looked at for bytes no call
// reads. No goroutine reads a tcp end's socket but its callers', for
// latency; so while an end takes nothing (a process paused, or busy
// elsewhere), the payloads of large messages, pushed at once, filled both
// sockets' buffers, the sender's write stalled, and the kernel's bound on
// unacknowledged data (DeadAfter) ended the connection. A look costs a
// poll, about a microsecond.
const drainEvery = 50 * time.Millisecond

// drainFor bounds one drain: a frame still arriving waits for the next.
const drainFor = time.Millisecond

// idleDrains drains a non-resumable end's socket every drainEvery, until
// the link closes or its Conn is dropped (a resumable one's watch does it).
func (l *tcpLink) idleDrains(dropped <-chan struct{}) {
	defer l.idle.Done()
	t := time.NewTicker(drainEvery)
	defer t.Stop()
	for {
		select {
		case <-l.done:
			return
		case <-dropped:
			return
		case <-t.C:
		}
		if l.deadErr.Load() != nil || l.peerClosed.Load() {
			return
		}
		l.drainIdle(l.w.Load())
	}
}

// drainIdle reads what w's socket holds, as a receiver would, when no call
// holds the reader role: frames land in the image and the rendezvous
// assemblies (bounded by credits and BulkSlots), where calls find them.
func (l *tcpLink) drainIdle(w *wire) {
	if !socketReadable(w.raw) {
		return
	}
	select {
	case l.rsem <- struct{}{}:
	default:
		return // a call reads
	}
	if l.w.Load() == w && !l.isDown() {
		ctx, cancel := context.WithTimeout(context.Background(), drainFor)
		err := l.readUntilFlushing(ctx, func() bool { return !socketReadable(w.raw) }, false)
		cancel()
		_ = err // a break or corrupt frame has failed the link, which calls report
	}
	<-l.rsem
	l.announce()
}

// watchLiveness makes the kernel declare the peer dead after about
// cfg.DeadAfter of silence (the tcp counterpart of the shm heartbeat):
// keepalive probes every cfg.Heartbeat while the connection is idle, which
// Linux counts in whole seconds, and a bound on unacknowledged data while
// it is not. Either ends pending and later calls with ErrPeerDead.
func watchLiveness(tc *net.TCPConn, cfg Config) {
	every := max(cfg.Heartbeat.Round(time.Second), time.Second)
	tc.SetKeepAliveConfig(net.KeepAliveConfig{Enable: true, Idle: every, Interval: every,
		Count: max(1, int((cfg.DeadAfter+every-1)/every))})
	setUserTimeout(tc, cfg.DeadAfter)
}

// DialTCP connects to a peer accepting with a TCPListener (or AcceptTCP)
// and runs the handshake (handshake.go): both ends prove the secret with
// fresh nonces and must use the same geometry (Cells, EagerLimit,
// MaxMessage, BulkSlots); a difference is reported by field. The
// handshake is bounded by ctx and by a 5 s timeout. A refusal wraps
// ErrAuth and will recur; other errors (no listener yet, a busy one that
// closed at once, a timeout) may pass if dialed again. WithTLS runs the
// connection over TLS.
func DialTCP(ctx context.Context, addr string, secret []byte, cfg Config, opts ...TCPOption) (*Conn, error) {
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	o := tcpOptionsOf(opts)
	var d net.Dialer
	raw, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("fifo: dial %s: %w", addr, err)
	}
	nc, res, err := dialHandshake(ctx, raw, addr, secret, c, o, sessionID{})
	if err != nil {
		raw.Close()
		return nil, err
	}
	return newTCPConn(nc, raw, c, res), nil
}

// dialHandshake is the dialer's handshake on raw, through TLS if o says
// so; it returns the connection to speak over and, for a new connection
// to a listener that keeps sessions, the resumer of its session. A
// dialer always keeps its session; resume, when not zero, is the session
// it dials again.
func dialHandshake(ctx context.Context, raw net.Conn, addr string, secret []byte, cfg Config, o tcpOptions, resume sessionID) (net.Conn, *resumer, error) {
	end := limit(ctx, raw, o.timeout)
	s := shake{ctx: ctx, nc: raw, peer: addr, secret: secret, cfg: cfg, transport: "tcp", keeps: true, resume: resume}
	var t *transcript
	err := func() error {
		if o.tls != nil {
			tc := tls.Client(raw, tlsConfig(o.tls, addr))
			b, err := tlsHandshake(ctx, tc, addr)
			if err != nil {
				return err
			}
			s.nc, s.binding, s.tls = tc, b, true
		}
		var err error
		if t, err = s.dial(); err != nil {
			return err
		}
		return s.readVerdict()
	}()
	if eerr := end(); err == nil && eerr != nil {
		err = fmt.Errorf("fifo: handshake with %s: %w", addr, eerr)
	}
	if err != nil {
		return nil, nil, err
	}
	var res *resumer
	if sid, ok := s.session(t); ok && resume == (sessionID{}) {
		res = newResumer(sid, addr)
		res.redial = redialer(addr, secret, cfg, o, sid)
	}
	return s.nc, res, nil
}

// AcceptTCP returns one connection from ln that passed the handshake (see
// DialTCP), as a TCPListener's Accept does: strays, garbage, wrong
// secrets and silent connections are dropped meanwhile, their handshakes
// running side by side. If none comes before ctx ends, the error also
// names the last refusal. ln stays open; its Accept is interrupted with a
// deadline (cleared on return), so AcceptTCP must not run on one listener
// from two goroutines at once. A listener that serves connections for a
// while is better made with NewTCPListener.
func AcceptTCP(ctx context.Context, ln net.Listener, secret []byte, cfg Config) (*Conn, error) {
	if _, ok := ln.(deadliner); !ok {
		return acceptOneByOne(ctx, ln, secret, cfg)
	}
	var mu sync.Mutex
	var last error
	o := tcpOptionsOf(nil)
	o.refused = func(err error) {
		mu.Lock()
		last = err
		mu.Unlock()
	}
	l, err := newTCPListener(ln, false, secret, cfg, o)
	if err != nil {
		return nil, err
	}
	defer l.Close()
	c, err := l.Accept(ctx)
	if err != nil {
		mu.Lock()
		defer mu.Unlock()
		if last != nil {
			return nil, fmt.Errorf("%w (%d refused, the last: %w)", err, l.Refused(), last)
		}
		return nil, err
	}
	return c, nil
}

// acceptOneByOne is AcceptTCP on a listener whose Accept no deadline can
// interrupt: one connection at a time, in this goroutine, so none outlives
// the call; ctx is only seen between connections.
func acceptOneByOne(ctx context.Context, ln net.Listener, secret []byte, cfg Config) (*Conn, error) {
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	o := tcpOptionsOf(nil)
	for {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("fifo: accept: %w", err)
		}
		nc, err := ln.Accept()
		if err != nil {
			return nil, fmt.Errorf("fifo: accept: %w", err)
		}
		peer := nc.RemoteAddr().String()
		end := limit(ctx, nc, o.timeout)
		s := shake{ctx: ctx, nc: nc, peer: peer, secret: secret, cfg: c, transport: "tcp"}
		_, err = s.accept()
		if err == nil && s.peerHello.Session != (sessionID{}) {
			// This end keeps no sessions: a re-dial cannot resume here.
			nc.Write([]byte{verdictUnknownSession})
			err = errUnknownSession
		}
		if err == nil {
			_, err = nc.Write([]byte{verdictAccepted})
		}
		if eerr := end(); err == nil && eerr != nil {
			err = eerr
		}
		if err != nil {
			nc.Close()
			continue
		}
		return newTCPConn(nc, nc, c, nil), nil
	}
}

// spinReader reads the socket for the link's bufio.Reader. A goroutine
// waiting for a socket in Go's netpoller is woken by a thread blocked in
// epoll_wait, which on a virtual machine takes 8-35 us, most of an
// exchange's round trip over loopback. So a reader first retries the
// socket without blocking for up to spin (a read that finds nothing costs
// about half a microsecond), which catches the next message of a quick
// exchange with no wake-up, and only then waits in the netpoller. It holds
// its processor meanwhile, as any spinning receiver does.
type spinReader struct {
	nc   net.Conn
	raw  syscall.RawConn
	spin time.Duration
	// One read attempt's buffer and outcome, and the function RawConn.Read
	// calls, made once: a closure per attempt escaped to the heap, three
	// allocations for every poll of the socket.
	buf     []byte
	n       int
	rerr    error
	attempt func(fd uintptr) bool
}

// newSpinReader returns nc itself when there is nothing to spin on.
func newSpinReader(nc net.Conn, spin time.Duration) io.Reader {
	sc, ok := nc.(syscall.Conn)
	if !ok || spin <= 0 {
		return nc
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return nc
	}
	s := &spinReader{nc: nc, raw: raw, spin: spin}
	s.attempt = s.readOnce
	return s
}

// readOnce is called once per RawConn.Read, since it never asks to wait.
func (s *spinReader) readOnce(fd uintptr) bool {
	s.n, s.rerr = syscall.Read(int(fd), s.buf)
	return true
}

func (s *spinReader) Read(p []byte) (int, error) {
	if len(p) > 0 {
		s.buf = p
		defer func() { s.buf = nil }()
		var start time.Time
		for i := 0; ; i++ {
			// RawConn.Read honours the read deadline and Close.
			err := s.raw.Read(s.attempt)
			if err == nil && s.rerr == nil && s.n > 0 {
				return s.n, nil
			}
			if err != nil || s.rerr != syscall.EAGAIN {
				break // the blocking read reports it (EOF, reset, deadline, close)
			}
			if i == 0 {
				start = time.Now()
			} else if time.Since(start) > s.spin {
				break
			}
		}
	}
	return s.nc.Read(p)
}
