package fifo

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rrefkit/rref/generated/fifowire"
)

// A resumable tcp connection outlives the tcp connection it runs over: when
// that breaks (a reset, a timeout, a middlebox dropping it), the dialer
// dials again, both ends prove the secret again for the same session
// (handshake.go), and the link goes on where it stopped, with no message
// lost or delivered twice. It works because every frame is idempotent or
// numbered:
//
//   - A put carries its ring position, and the receiver applies whole frames
//     only (readFrame peeks until a frame is complete), so its next position
//     and sequence mark exactly what it holds. The sender keeps a copy of
//     what it put (the tx image, bounded by the ring: the receiver's credits
//     never let it run more than a ring ahead) and puts again from there.
//   - A credit return carries an absolute count, taken as a maximum.
//   - A rendezvous payload is kept until its finish. The receiver reports
//     the payloads it holds and how many bytes of each, and the sender goes
//     on from there, so a transfer progresses however often its connection
//     breaks; one not held whose request the receiver already took was
//     freed, its finish lost with the connection.
//
// After a new connection's handshake both ends send their state at once,
// then read the other's: the layout Resume of spec/fifowire.rspec (536
// bytes; its codec generated in generated/fifowire): the next position and
// sequence this end expects from the peer, how far it consumed the peer's
// ring, and the rendezvous payloads it holds with how many bytes of each,
//
// and each sends the frames the other lacks, then carries on. A link that
// is not restored within Config.DeadAfter of the break is dead (ErrPeerDead),
// as is one whose listener no longer holds the session: it restarted, or
// gave the dialer up first. Both ends of a connection must keep sessions: a
// dialer does, a TCPListener does, AcceptTCP does not.
const (
	resumeStateSize = fifowire.SizeResume
	// maxBulkSlots bounds Config.BulkSlots: a resume reports each slot's
	// payload, and its layout has room for this many.
	maxBulkSlots = len(fifowire.Resume{}.HeldIDs)

	// watchEvery is how often a resumable link looks at its socket for a
	// reset: an end that no call reads (a client between requests) must
	// still start the resume, or its peer, which cannot dial it, gives the
	// link up after DeadAfter and what was sent last is lost. A poll costs
	// about a microsecond.
	watchEvery = 50 * time.Millisecond

	// Re-dials back off from a millisecond (a reset connection usually
	// comes back at once) to a fifth of a second, so that a peer that is
	// stopped or unreachable for seconds is not dialed thousands of times.
	redialBackoffMin = time.Millisecond
	redialBackoffMax = 200 * time.Millisecond
)

// errUnknownSession is a listener's answer to a re-dial of a session it
// does not hold; the dialer's end is then dead.
var errUnknownSession = fmt.Errorf("%w: unknown session", ErrPeerDead)

// errRouted tells the acceptor that a handshake's connection went to the
// link that re-dialed it, not to Accept.
var errRouted = errors.New("fifo: connection routed to its session")

// resumer is what a resumable link keeps to restore its connection.
type resumer struct {
	link    *tcpLink
	session sessionID
	peer    string // for errors
	// redial makes a new connection for the session (the dialer's end);
	// at the listener's end, offers brings the connections dialed to it.
	redial func(ctx context.Context) (*wire, error)
	offers chan *wire
	forget func() // the listener drops the session: the link is dead or closed

	ctx    context.Context // ends when the link closes
	cancel context.CancelFunc

	mu       sync.Mutex // down's changes, stopped, bg.Add
	down     atomic.Bool
	stopped  bool
	cause    error // why the last connection broke
	bg       sync.WaitGroup
	resumes  atomic.Uint64
	bulkPool [][]byte // copies of finished rendezvous payloads, for reuse (under bmu)
}

func newResumer(session sessionID, peer string) *resumer {
	r := &resumer{session: session, peer: peer, offers: make(chan *wire, 1), forget: func() {}}
	r.ctx, r.cancel = context.WithCancel(context.Background())
	return r
}

// isDown reports whether the link waits for a new connection: no one
// reads, and frames that a resume regenerates are not queued.
func (l *tcpLink) isDown() bool { return l.res != nil && l.res.down.Load() }

// keepPut copies a put into the tx image (under wmu), from which a resume
// puts it again.
func (l *tcpLink) keepPut(pos uint64, h header, payload []byte) {
	l.txImg.place(pos, h, payload)
	l.txImg.publish(pos, h)
	l.txEnd = pos + h.cells()
	if h.kind == kindRdv {
		id := binary.LittleEndian.Uint32(payload)
		l.bmu.Lock()
		if o := l.out[id]; o != nil {
			o.pos, o.placed = pos, true
		}
		l.bmu.Unlock()
	}
}

// watch starts the resume of a link whose socket the kernel gave up while
// nothing read or wrote it (see watchEvery); it runs on its own goroutine,
// counted in bg, until the link closes or dies.
func (l *tcpLink) watch() {
	r := l.res
	defer r.bg.Done()
	t := time.NewTicker(watchEvery)
	defer t.Stop()
	for {
		select {
		case <-r.ctx.Done():
			return
		case <-t.C:
		}
		if l.deadErr.Load() != nil || l.closed.Load() || l.peerClosed.Load() {
			return
		}
		if w := l.w.Load(); w != nil && !r.down.Load() {
			if socketBroken(w.raw) {
				l.readWhileIdle(w)
			} else {
				l.drainIdle(w)
			}
		}
	}
}

// readWhileIdle takes the reader role, unless a call holds it (that call
// meets the break itself; readWhileIdle then reports false), and reads what
// w, broken, still holds as any reader would: frames, a close frame (a peer
// that closed is not resumed), then the error, which starts the resume.
// The watch calls it for an idle socket it found broken, and a writer
// whose write failed (writeFailed).
func (l *tcpLink) readWhileIdle(w *wire) bool {
	select {
	case l.rsem <- struct{}{}:
	default:
		return false
	}
	if l.w.Load() == w && !l.isDown() {
		ctx, cancel := context.WithTimeout(context.Background(), watchEvery)
		l.readUntil(ctx, func() bool { return false })
		cancel()
	}
	<-l.rsem
	l.announce()
	return true
}

// broke handles the failure of w, the link's connection. A resumable link
// goes down and a resume starts (nil); any other link is dead, or closed,
// and broke returns why. A resumable link found dead (a corrupt frame)
// gives its session up at once, so its peer's re-dial is refused then.
func (l *tcpLink) broke(w *wire, err error) error {
	if l.closed.Load() || l.peerClosed.Load() {
		return l.failed()
	}
	r := l.res
	if r == nil || l.deadErr.Load() != nil {
		l.setDead(err)
		if r != nil {
			r.forget()
		}
		return l.failed()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped {
		return ErrClosed
	}
	if l.w.Load() == w && !r.down.Load() {
		r.goDown(w, err)
	}
	l.announce()
	return nil
}

// goDown starts the resume of a link whose connection w broke (under mu).
func (r *resumer) goDown(w *wire, err error) {
	r.down.Store(true)
	r.cause = err
	w.nc.Close() // a reader or writer still on it returns
	r.bg.Add(1)
	go r.link.resume(w)
}

// offer hands the link a connection the peer re-dialed (the listener's
// end), taking the link down first if it had not noticed the break. It
// reports false when the link is closed or dead; the caller closes w.
func (r *resumer) offer(w *wire) bool {
	l := r.link
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped || l.deadErr.Load() != nil || l.closed.Load() {
		return false
	}
	if !r.down.Load() {
		r.goDown(l.w.Load(), fmt.Errorf("%w: %s dialed again", ErrPeerDead, r.peer))
	}
	select {
	case old := <-r.offers: // an earlier re-dial the resume has not taken
		old.nc.Close()
	default:
	}
	r.offers <- w
	return true
}

// open reports whether the link may still be resumed: not closed, dead or
// closing.
func (r *resumer) open() bool {
	l := r.link
	r.mu.Lock()
	defer r.mu.Unlock()
	return l != nil && !r.stopped && l.deadErr.Load() == nil && !l.closed.Load()
}

// stopResuming ends a resume in progress and any to come: the link closes.
func (l *tcpLink) stopResuming() {
	r := l.res
	if r == nil {
		return
	}
	r.mu.Lock()
	r.stopped = true
	r.mu.Unlock()
	r.cancel()
	r.forget()
	select {
	case w := <-r.offers:
		w.nc.Close()
	default:
	}
}

// resume restores the link after old broke, within DeadAfter; it runs on
// its own goroutine, counted in bg.
func (l *tcpLink) resume(old *wire) {
	r := l.res
	defer r.bg.Done()
	ctx, cancel := context.WithTimeout(r.ctx, l.cfg.DeadAfter)
	defer cancel()
	r.mu.Lock()
	cause := r.cause
	r.mu.Unlock()
	last := error(nil)
	wait := redialBackoffMin
	for {
		w, err := r.next(ctx)
		if err == nil {
			if err = l.restore(ctx, old, w); err == nil {
				return
			}
			w.nc.Close()
		}
		if r.ctx.Err() != nil {
			return // closing
		}
		if final(err) || ctx.Err() != nil {
			if last == nil || final(err) {
				last = err
			}
			l.giveUp(cause, last)
			return
		}
		last = err
		if r.redial == nil {
			continue // the listener's end waits for the next re-dial
		}
		select {
		case <-time.After(wait):
		case <-ctx.Done():
		}
		wait = min(2*wait, redialBackoffMax)
	}
}

// final reports whether a resume's failure will recur: the peer sent
// nonsense, no longer holds the session, or refuses this end (a listener
// of another group now at its address).
func final(err error) bool {
	return errors.Is(err, ErrCorrupt) || errors.Is(err, errUnknownSession) || errors.Is(err, ErrAuth)
}

// next is the next connection to resume over: dialed again, or offered.
func (r *resumer) next(ctx context.Context) (*wire, error) {
	if r.redial != nil {
		return r.redial(ctx)
	}
	select {
	case w := <-r.offers:
		return w, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("fifo: %s did not dial again: %w", r.peer, ctx.Err())
	}
}

// giveUp makes a link that could not be restored dead.
func (l *tcpLink) giveUp(cause, last error) {
	r := l.res
	var err error
	switch {
	case errors.Is(last, ErrCorrupt):
		err = last
	case final(last):
		err = fmt.Errorf("%w (after the connection broke: %v)", last, cause)
	default:
		err = fmt.Errorf("%w: the connection to %s broke (%v) and was not restored within %v (last: %v)", ErrPeerDead, r.peer, cause, l.cfg.DeadAfter, last)
	}
	l.setDead(err)
	r.forget()
	l.announce()
}

// resumeState is one end's state as a resume exchanges it.
type resumeState struct {
	nextPos, consumed uint64
	nextSeq           uint32
	held              []heldBulk
}

// heldBulk is a rendezvous payload a receiver holds, n bytes of it.
type heldBulk struct{ id, n uint32 }

func (s *resumeState) append(b []byte) []byte {
	r := fifowire.Resume{NextPos: s.nextPos, Consumed: s.consumed, NextSeq: s.nextSeq, Held: uint32(len(s.held))}
	for i, h := range s.held[:min(len(s.held), maxBulkSlots)] {
		r.HeldIDs[i], r.HeldBytes[i] = h.id, h.n
	}
	return fifowire.AppendResume(b, &r)
}

func parseResumeState(b []byte, slots int) (resumeState, error) {
	r, _, err := fifowire.ConsumeResume(b)
	if err != nil {
		return resumeState{}, &CorruptError{Why: fmt.Sprintf("a resume report that does not decode: %v", err)}
	}
	s := resumeState{nextPos: r.NextPos, consumed: r.Consumed, nextSeq: r.NextSeq}
	if r.Held > uint32(slots) {
		return s, &CorruptError{Why: fmt.Sprintf("a resume reports %d rendezvous payloads held, more than the %d slots", r.Held, slots)}
	}
	for i := range int(r.Held) {
		s.held = append(s.held, heldBulk{r.HeldIDs[i], r.HeldBytes[i]})
	}
	return s, nil
}

// restore resumes the link over w, which passed the session's handshake:
// it takes the reader and writer roles, exchanges states with the peer,
// queues what the peer lacks, and installs w.
func (l *tcpLink) restore(ctx context.Context, old, w *wire) error {
	select {
	case l.rsem <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-l.rsem }()
	l.wmu.Lock()
	for l.writing && !l.closeOut { // a writer on the old connection: it was closed, so it returns soon
		l.wcond.Wait()
	}
	if l.closeOut { // Close holds the writer role for good
		l.wmu.Unlock()
		return ErrClosed
	}
	l.writing = true
	mine := l.report()
	// Frames queued until now are regenerated from state, or implied by
	// the report (a finish); from now on only finishes are queued.
	l.wbuf = l.wbuf[:0]
	l.wmu.Unlock()
	peer, err := exchangeStates(ctx, w, &mine, l.cfg)
	l.wmu.Lock()
	if err == nil {
		var frames []byte
		if frames, err = l.regenerate(peer); err == nil {
			if err = l.install(old, w, peer); err == nil {
				l.wbuf = append(frames, l.wbuf...)
			}
		}
	}
	l.leaveWriter()
	l.wmu.Unlock()
	if err != nil {
		return err
	}
	l.res.resumes.Add(1)
	l.announce()
	// What the peer lacks leaves now; a failure here is a new break. The
	// flush is counted in bg (this resume still is, so the count is above
	// zero), and Close waits for it.
	l.res.bg.Add(1)
	go func() {
		defer l.res.bg.Done()
		l.flushTx()
	}()
	return nil
}

// report is this end's state for a resume (under wmu, holding the reader
// role): the reader applies whole frames only, so its positions and the
// rendezvous payloads it holds say exactly what it received.
func (l *tcpLink) report() resumeState {
	s := resumeState{nextPos: l.nextPos, nextSeq: l.nextSeq, consumed: l.rxPos()}
	l.bmu.Lock()
	for id, b := range l.assembly {
		s.held = append(s.held, heldBulk{id, uint32(len(b))})
	}
	l.bmu.Unlock()
	return s
}

// exchangeStates sends mine over w and reads the peer's, bounded by ctx
// and the handshake timeout.
func exchangeStates(ctx context.Context, w *wire, mine *resumeState, cfg Config) (resumeState, error) {
	end := limit(ctx, w.nc, handshakeTimeout)
	var buf [resumeStateSize]byte
	_, err := w.nc.Write(mine.append(buf[:0]))
	if err == nil {
		_, err = io.ReadFull(w.nc, buf[:])
	}
	if eerr := end(); err == nil && eerr != nil {
		err = eerr
	}
	if err != nil {
		return resumeState{}, fmt.Errorf("fifo: resume: state exchange: %w", err)
	}
	return parseResumeState(buf[:], cfg.BulkSlots)
}

// regenerate builds the frames the peer lacks, given its state (under
// wmu): rendezvous payloads it does not hold, every put from its next
// position on, and a credit return.
func (l *tcpLink) regenerate(peer resumeState) ([]byte, error) {
	if peer.nextPos > l.txEnd || l.txEnd-peer.nextPos > l.cfg.Cells {
		return nil, &CorruptError{Cell: peer.nextPos, Why: fmt.Sprintf("a resume asks for puts from cell %d; this end put up to %d, and keeps one ring", peer.nextPos, l.txEnd)}
	}
	if peer.consumed > peer.nextPos {
		// Credits for cells never received would switch flow control off.
		return nil, &CorruptError{Cell: peer.consumed, Why: fmt.Sprintf("a resume reports cells consumed up to %d, past the %d it received", peer.consumed, peer.nextPos)}
	}
	var b []byte
	held := map[uint32]uint32{}
	for _, h := range peer.held {
		held[h.id] = h.n
	}
	l.bmu.Lock()
	for _, h := range peer.held {
		if l.out[h.id] == nil {
			// Given up (abortBulk) while the link was down, or its abort
			// frame lost with the connection: the peer drops it.
			b = appendAbort(b, h.id)
		}
	}
	for id, o := range l.out {
		have, isHeld := held[id]
		switch {
		case isHeld && int(have) > len(o.data):
			l.bmu.Unlock()
			return nil, &CorruptError{Why: fmt.Sprintf("a resume reports %d bytes of rendezvous %d, which has %d", have, id, len(o.data))}
		case isHeld && int(have) == len(o.data): // its finish will come
		case o.placed && o.pos < peer.nextPos && !isHeld:
			// The peer took its request and freed it: the finish was lost.
			delete(l.out, id)
			l.recycle(o.data)
			select {
			case <-l.slots:
			default:
			}
		default: // the rest, from where the peer stopped
			for off := int(have); ; off += bulkChunk {
				b = appendBulk(b, id, len(o.data), off, o.data[off:min(off+bulkChunk, len(o.data))])
				if off+bulkChunk >= len(o.data) {
					break
				}
			}
			o.resent = true
		}
	}
	l.bmu.Unlock()
	pos, seq := peer.nextPos, peer.nextSeq
	for pos != l.txEnd {
		h := unpack(*l.txImg.pubWord(pos))
		if h.seq != seq&seqMask {
			return nil, &CorruptError{Cell: pos, Why: fmt.Sprintf("a resume asks for put %d at cell %d, which is not where this end put it", seq, pos)}
		}
		if err := l.txImg.validate(pos, h, l.cfg.EagerLimit); err != nil {
			return nil, err
		}
		n := h.cells()
		if pos+n > l.txEnd {
			return nil, &CorruptError{Cell: pos, Why: "a resume asks for puts from inside a message"}
		}
		h.seq = seq
		var payload []byte
		if h.kind != kindPad {
			payload = l.txImg.payload(pos, h.length)
		}
		b = appendPut(b, pos, h, payload)
		pos, seq = pos+n, seqAfter(seq)
	}
	return appendCredit(b, l.rxPos()), nil
}

// install makes w the link's connection (under wmu, holding the reader
// role): the reader starts afresh on it, and the peer's credits count. A
// link closing meanwhile keeps its old, closed connection.
func (l *tcpLink) install(old, w *wire, peer resumeState) error {
	r := l.res
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped {
		return ErrClosed
	}
	w.gen = old.gen + 1
	w.prepare(l.cfg)
	l.br.Reset(newSpinReader(w.nc, l.cfg.SocketSpin))
	for v := l.txCred.Load(); peer.consumed > v && !l.txCred.CompareAndSwap(v, peer.consumed); v = l.txCred.Load() {
	}
	l.w.Store(w)
	r.down.Store(false)
	return nil
}

// Resumes counts how many times the connection was restored after a break
// (resumable tcp connections; 0 for others).
func (c *Conn) Resumes() uint64 {
	if l, ok := c.l.(*tcpLink); ok && l.res != nil {
		return l.res.resumes.Load()
	}
	return 0
}

// redialer is a dialer's way to its session again: a new tcp connection
// and the session's handshake, each attempt bounded by the handshake
// timeout.
func redialer(addr string, secret []byte, cfg Config, o tcpOptions, sid sessionID) func(context.Context) (*wire, error) {
	return func(ctx context.Context) (*wire, error) {
		actx, cancel := context.WithTimeout(ctx, o.timeout)
		defer cancel()
		var d net.Dialer
		raw, err := d.DialContext(actx, "tcp", addr)
		if err != nil {
			return nil, fmt.Errorf("fifo: dial %s again: %w", addr, err)
		}
		nc, _, err := dialHandshake(actx, raw, addr, secret, cfg, o, sid)
		if err != nil {
			raw.Close()
			return nil, err
		}
		return &wire{nc: nc, raw: raw}, nil
	}
}
