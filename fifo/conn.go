package fifo

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// Config sets a connection's geometry and behaviour. Both ends must agree on
// Cells and MaxMessage; the handshake checks them.
type Config struct {
	Cells           uint64 // ring cells per direction, a power of two (default 4096: 256 KiB)
	EagerLimit      int    // larger messages take the rendezvous channel (default 16 KiB, at least Immediate, at most Cells*64/4)
	MaxMessage      int    // largest message (default 4 MiB)
	BulkSlots       int    // rendezvous slots per direction, shm and mem (default 2)
	CreditThreshold uint64 // cells consumed before an explicit credit return (default Cells/4)
	Spin            int    // polls before parking (default 16000, some 50 us); negative: never park
	// SocketSpin is how long a tcp reader retries its socket before it
	// waits in Go's netpoller (default 0: it waits at once). Spinning
	// spares a wake-up when the reader's goroutine is one of several a
	// message passes through (the runtime's workers set 30 us: a Call took
	// 18-23 us against 31-34); where the reader itself answers, it only
	// competes with the peer and the kernel for processors (a 56-byte
	// ping-pong took 10-17 us spinning, 8.4-10 us not, raw TCP 7-9 us).
	SocketSpin time.Duration
	Heartbeat  time.Duration // liveness beat (default 50 ms; tcp keepalive probes, in whole seconds)
	// DeadAfter is how long a peer may be silent before it is dead
	// (default 10 s; shm: no heartbeat; tcp: unacknowledged data, or idle
	// plus unanswered keepalive probes). A live process can be silent for
	// seconds: stopped (SIGSTOP, a debugger), descheduled on a loaded
	// host, or a virtual machine migrating. Choose DeadAfter above the
	// longest such pause expected, since a peer found dead is fenced for
	// good and its references are reclaimed, and below how long a dead
	// peer's references may linger. A peer that closes its end is noticed
	// at once; one whose process dies without closing is noticed at once
	// over shm and on a tcp connection that does not resume (AcceptTCP),
	// but a resumable one (DialTCP to a TCPListener) waits up to DeadAfter
	// for the link to come back, since from this end a killed process and
	// a broken connection look alike.
	DeadAfter time.Duration

	// Exclusive promises that at most one goroutine sends (Send, TrySend)
	// and at most one receives (Recv, RecvFunc, Poll) at a time on this end,
	// as Aeron's exclusive publications do; the two may differ, and may
	// change hands with the usual synchronization. Messages then take no
	// lock: the sender's one atomic store publishes a message, and taking
	// it costs the receiver only loads. Breaking the promise is a data race
	// (go test -race reports it). Close may still be called at any time,
	// but does not wait for running calls (they fail soon after), and a
	// shared-memory ring is unmapped once the Conn is unreachable rather
	// than by Close. Each end chooses for itself.
	Exclusive bool
}

func (c *Config) withDefaults() (Config, error) {
	d := *c
	if d.Cells == 0 {
		d.Cells = 4096
	}
	if d.Cells < 16 || d.Cells&(d.Cells-1) != 0 || d.Cells > maxCells {
		return d, fmt.Errorf("%w: Cells must be a power of two from 16 to 2^18, not %d", ErrConfig, d.Cells)
	}
	maxEager := min(int(d.Cells*Cell/4)-headerSize, 1<<20)
	if d.EagerLimit == 0 {
		d.EagerLimit = min(16<<10, maxEager)
	}
	// A message that fits in its header's cell never takes the rendezvous
	// channel: the direct paths put and take such messages unchecked
	// against the limit.
	if d.EagerLimit < Immediate || d.EagerLimit > maxEager {
		return d, fmt.Errorf("%w: EagerLimit must be from %d to %d for %d cells, not %d", ErrConfig, Immediate, maxEager, d.Cells, d.EagerLimit)
	}
	if d.MaxMessage == 0 {
		d.MaxMessage = DefaultMaxMessage
	}
	if d.MaxMessage < d.EagerLimit || d.MaxMessage > 1<<30 {
		return d, fmt.Errorf("%w: MaxMessage must be from EagerLimit to 1 GiB, not %d", ErrConfig, d.MaxMessage)
	}
	if d.BulkSlots == 0 {
		d.BulkSlots = 2
	}
	if d.BulkSlots < 1 || d.BulkSlots > 64 {
		return d, fmt.Errorf("%w: BulkSlots must be from 1 to 64", ErrConfig)
	}
	if d.CreditThreshold == 0 {
		d.CreditThreshold = d.Cells / 4
	}
	if d.CreditThreshold > d.Cells/2 {
		return d, fmt.Errorf("%w: CreditThreshold above half the ring could starve a sender", ErrConfig)
	}
	if d.Spin == 0 {
		d.Spin = defaultSpin
	}
	if d.Heartbeat == 0 {
		d.Heartbeat = 50 * time.Millisecond
	}
	if d.DeadAfter == 0 {
		d.DeadAfter = DefaultDeadAfter
	}
	return d, nil
}

// DefaultDeadAfter tolerates pauses of several seconds: with 1 s, a user
// stopped for 3 s had every value it held freed by its owner.
const DefaultDeadAfter = 10 * time.Second

// DefaultMaxMessage is the largest message when Config.MaxMessage is 0: a
// shared-memory connection maps BulkSlots slots of this size each way.
const DefaultMaxMessage = 4 << 20

// defaultSpin polls take some 50 us here. A receiver that parks costs the
// next message a wake-up call and tens of microseconds; with 4000 polls
// (15 us) an RPC between two processes parked on 1-2% of calls, 4x more
// often than with 16000, and its median round trip was about 15% slower.
const defaultSpin = 16000

// link is what a provider implements, as OFI providers do: the one-sided put
// of a message with its remote event, the explicit credit channel, the
// rendezvous bulk transfer, wake-ups and failure.
type link interface {
	// put writes a whole message at tx position pos and publishes it. For a
	// pad, h.length spans to the ring's end and payload is empty.
	put(pos uint64, h header, payload []byte) error
	// flushTx pushes out puts queued since the last flush (tcp pipelining).
	flushTx() error
	// txConsumed is the peer's last explicit credit return for our tx ring.
	txConsumed() uint64
	// rx is the ring this end reads: shared memory, or a local image.
	rx() *ring
	// returnCredits tells the peer how far this end has consumed; it never
	// needs ring credits itself.
	returnCredits(consumed uint64) error
	// park waits until the rx ring may have changed, the deadline passes, or
	// the link fails. The caller re-checks after it returns. wake says
	// whether the peer should wake this end when it puts a message; it is
	// false while pollers read the ring.
	park(ctx context.Context, pos uint64, seq uint32, wake bool) error
	// polling tells the peer not to wake this end (on), or to wake it again
	// (off), while goroutines poll the ring; wakeSelf wakes a parked receiver
	// of this end.
	polling(on bool)
	wakeSelf()
	// wakeUps counts the wake-up calls this end made for its peer.
	wakeUps() uint64
	// waitTx waits, honouring ctx, until cond holds; cond reads state the
	// peer's credit returns and finishes update.
	waitTx(ctx context.Context, cond func() bool) error
	// bulkPut exposes a large payload and returns its slot.
	bulkPut(ctx context.Context, p []byte) (uint32, error)
	// bulkView returns rendezvous payload slot in place; bulkFree releases
	// it to the sender (the finish).
	bulkView(slot uint32, n uint32) ([]byte, error)
	bulkFree(slot uint32) error
	// cheapCredits reports whether an explicit credit return costs no more
	// than a store (shared memory), so it is worth making before parking.
	cheapCredits() bool
	// cheapPolls reports whether a goroutine polling the ring sees a
	// message without reading anything itself (Conn.Polls).
	cheapPolls() bool
	// failed reports a closed or failed link, cheaply.
	failed() error
	// checkPeer also checks the peer's liveness, which may read the clock.
	checkPeer() error
	// spin is how many polls are worth making before parking on this link.
	spin(configured int) int
	// shutdown marks the link closed and wakes both ends; it is safe while
	// Send and Recv run. release frees the link's resources once they have
	// left (the Conn holds both of its locks); with lingering set, calls
	// that take no lock (Config.Exclusive) may still read the rings while
	// lingering is reachable, so shared memory must stay mapped until then.
	shutdown()
	release(lingering *Conn) error
}

// Conn is one end of a connection. Send and Recv are safe for concurrent use;
// sends are ordered among themselves, except that a message above the eager
// limit (rendezvous) may be overtaken by smaller messages sent after it began:
// messages of one connection can complete out of send order. Each Send
// returns when its own message is handed to the transport, and its buffer may
// be reused at once.
type Conn struct {
	l   link
	cfg Config

	txMu  sync.Mutex
	txPos uint64
	txSeq uint32
	// reserved is the ring cell set aside for the request of the large
	// message whose payload is being exposed (under txMu, or the
	// exclusive sender's): no other message may take it, so a request
	// never waits for the ring once its payload is out. rdvTurn is held
	// by that message's sender: one is exposed at a time (expose).
	reserved  uint64
	rdvTurn   chan struct{}
	peerCred  atomic.Uint64 // piggybacked consumption of our tx ring
	creditLog atomic.Uint64 // credit stalls, for metrics
	parks     atomic.Uint64 // receivers that parked, for metrics

	inUse      sync.RWMutex // read-held by receivers, so Close frees the ring after they leave
	rxMu       sync.Mutex   // taking a message; not held while waiting for one
	parkMu     sync.Mutex   // one receiver parks at a time
	pollers    atomic.Int32
	parking    atomic.Int32
	rxPos      uint64
	rxSeq      uint32
	rxReported uint64
	rxDone     atomic.Uint64 // cells consumed, piggybacked on our sends

	cells  uint64
	rdvBuf [8]byte // under txMu: a rendezvous request's payload

	doneStored uint64 // rxPos last published in rxDone (under rxMu)
	// peerCredLow is the last piggybacked credit seen (under rxMu): only a
	// change needs recording, once per 1<<creditUnit cells.
	peerCredLow uint32

	// shm is the link of a shared-memory or in-process end: one-cell
	// messages are put on a direct path (sendCell), and taken on one
	// (pollCell) by exclusive ends, which are direct: they take no lock
	// for either.
	shm    *memLink
	direct bool

	closeOnce sync.Once
	closeErr  error
	broken    atomic.Pointer[error]
}

func newConn(l link, cfg Config) *Conn {
	c := &Conn{l: l, cfg: cfg, txSeq: 1, rxSeq: 1, cells: cfg.Cells, rdvTurn: make(chan struct{}, 1)}
	if ml, ok := l.(*memLink); ok {
		c.shm = ml
		c.direct = cfg.Exclusive
	}
	return c
}

// Stats are a connection's counters.
type Stats struct {
	CreditStalls uint64 // sends that waited for credits
	// Parks counts receivers that stopped spinning and parked; WakeUps the
	// parked peers this end woke with a system call (shared memory only;
	// over tcp a parked receiver waits in the socket). Each costs tens of
	// microseconds on a loaded host: a low-latency exchange has few.
	Parks, WakeUps uint64
}

// Stats returns the connection's counters.
func (c *Conn) Stats() Stats {
	return Stats{CreditStalls: c.creditLog.Load(), Parks: c.parks.Load(), WakeUps: c.l.wakeUps()}
}

func (c *Conn) fail(err error) error {
	c.broken.CompareAndSwap(nil, &err)
	c.l.shutdown()
	return *c.broken.Load()
}

// flushFailed passes on a failure met while writing out. When it is the
// peer's end (dead, or closed), the link keeps it, so later calls fail with
// it, while what the peer sent before it is still delivered: c.fail would
// stop this end's receives too.
func (c *Conn) flushFailed(err error) error {
	if errors.Is(err, ErrPeerDead) || errors.Is(err, ErrClosed) {
		return err
	}
	return c.fail(err)
}

// err is on every call's fast path: a few atomic loads, no lock, no clock.
func (c *Conn) err() error {
	if p := c.broken.Load(); p != nil {
		return *p
	}
	return c.l.failed()
}

// extend widens a 16-bit piggybacked credit (in units of 1<<creditUnit
// cells) against a known 64-bit cell count. The true value never trails the
// known one by more than a ring, far less than half the 16-bit range.
func extend(known uint64, low uint32) uint64 {
	k := known >> creditUnit
	v := k&^0xffff | uint64(low&0xffff)
	if v+1<<15 < k {
		v += 1 << 16
	} else if v > k+1<<15 && v >= 1<<16 {
		v -= 1 << 16
	}
	return v << creditUnit
}

// consumedKnown is how far the peer has consumed our tx ring, as far as we
// know (under txMu). A peer cannot have consumed cells never sent: a larger
// claim, from a confused or hostile peer, is clamped.
func (c *Conn) consumedKnown() uint64 { return c.consumedGiven(c.l.txConsumed()) }

// consumedGiven is consumedKnown with the peer's explicit return in hand.
func (c *Conn) consumedGiven(explicit uint64) uint64 {
	return min(max(explicit, c.peerCred.Load()), c.txPos)
}

// Send sends p. It waits for credits when the ring is full (back-pressure,
// honouring ctx); it never drops a message.
func (c *Conn) Send(ctx context.Context, p []byte) error {
	if c.shm != nil && len(p) <= Immediate {
		c.lockTx()
		sent := c.sendCell(p)
		c.unlockTx()
		if sent {
			return nil
		}
	}
	// Not c.err(): that reads the ring, which Close may unmap until the tx
	// lock is held (sendLocked checks the peer under it).
	if p := c.broken.Load(); p != nil {
		return *p
	}
	if len(p) > c.cfg.MaxMessage {
		return fmt.Errorf("%w: %d bytes, limit %d", ErrTooLarge, len(p), c.cfg.MaxMessage)
	}
	kind := uint8(kindData)
	if len(p) > c.cfg.EagerLimit {
		slot, err := c.expose(ctx, func(ctx context.Context) (uint32, error) { return c.l.bulkPut(ctx, p) })
		if err != nil {
			return err
		}
		binary.LittleEndian.PutUint32(c.rdvBuf[0:], slot)
		binary.LittleEndian.PutUint32(c.rdvBuf[4:], uint32(len(p)))
		p, kind = c.rdvBuf[:], kindRdv
	} else {
		c.lockTx()
	}
	return c.sendAndUnlock(ctx, kind, p)
}

// sendAndUnlock places a message (holding the tx lock), releases the lock
// and pushes the message out.
func (c *Conn) sendAndUnlock(ctx context.Context, kind uint8, p []byte) error {
	err := c.sendLocked(ctx, kind, p)
	c.unlockTx()
	if err != nil {
		return err
	}
	// Pushed out after the lock is released: while one sender writes, the
	// others place their messages, and the writer takes them along (tcp).
	if err := c.l.flushTx(); err != nil {
		return c.flushFailed(err)
	}
	runtime.KeepAlive(c) // an exclusive end's ring stays mapped while c is reachable
	return nil
}

// SendFunc sends a message of n bytes that fill writes in place, for a
// sender that produces its message rather than holds it. Over shared
// memory and the fabric, a message above Config.EagerLimit is written
// straight into the rendezvous slot the peer reads it from, sparing the
// copy Send makes there (for a megabyte over libfabric's tcp, a third of
// the sender's work). p has length n and holds whatever its memory held
// before: fill must write all of it. p is valid only until fill returns;
// fill must not call this connection's methods (Close waits for fill, and
// they may wait for Close). Large messages are filled one at a time.
// If fill fails, nothing is sent and its error is returned.
func (c *Conn) SendFunc(ctx context.Context, n int, fill func(p []byte) error) error {
	if n < 0 {
		return fmt.Errorf("fifo: SendFunc of %d bytes: a size is never negative", n)
	}
	if n > c.cfg.MaxMessage {
		return fmt.Errorf("%w: %d bytes, limit %d", ErrTooLarge, n, c.cfg.MaxMessage)
	}
	cl, claims := c.l.(claimer)
	if n <= c.cfg.EagerLimit || !claims {
		return c.sendFilled(ctx, n, fill)
	}
	if p := c.broken.Load(); p != nil {
		return *p
	}
	slot, err := c.expose(ctx, func(ctx context.Context) (uint32, error) {
		slot, p, err := cl.bulkClaim(ctx, n)
		if err != nil {
			return 0, err
		}
		filled := false
		defer func() {
			if !filled { // fill failed or panicked: nothing was sent
				cl.bulkAbort(slot)
			}
		}()
		if err := fill(p); err != nil {
			return 0, err
		}
		filled = true
		return slot, nil
	})
	if err != nil {
		return err
	}
	binary.LittleEndian.PutUint32(c.rdvBuf[0:], slot)
	binary.LittleEndian.PutUint32(c.rdvBuf[4:], uint32(n))
	return c.sendAndUnlock(ctx, kindRdv, c.rdvBuf[:])
}

// sendFilled is SendFunc through Send: fill writes into a buffer of the
// package's, which Send copies.
func (c *Conn) sendFilled(ctx context.Context, n int, fill func(p []byte) error) error {
	bp := fillBufs.Get().(*[]byte)
	defer fillBufs.Put(bp)
	if cap(*bp) < n {
		*bp = make([]byte, n)
	}
	p := (*bp)[:n]
	if err := fill(p); err != nil {
		return err
	}
	return c.Send(ctx, p)
}

// fillBufs are sendFilled's buffers.
var fillBufs = sync.Pool{New: func() any { return new([]byte) }}

// claimer is a link whose rendezvous slots the sender can write in place
// (SendFunc): bulkClaim takes a free slot and returns its first n bytes,
// which bulkAbort gives back unsent.
type claimer interface {
	bulkClaim(ctx context.Context, n int) (uint32, []byte, error)
	bulkAbort(slot uint32)
}

// rdvCells is the ring cells of a rendezvous request (its slot and size, 8
// bytes, beside the header): one, which never needs a pad.
const rdvCells = 1

// expose is the first half of a large message: it reserves the ring cell
// of the message's request, then exposes the payload with put (the
// rendezvous channel), outside the ring lock so that small messages keep
// flowing meanwhile, and under inUse, as Close unmaps a shared end's slots
// only once it holds that. It returns holding the tx lock, the cell
// reserved no more, so that the request is put at once; on error it holds
// nothing and nothing was exposed. Before the reservation, a Send whose
// context ended while it waited for the ring, after put, left its slot
// out for good: with every slot out, no large message went again.
//
// One message is exposed at a time (rdvTurn), so at most one cell is
// reserved. Senders wait for the ring holding the tx lock, which the
// reservation's holder needs to give its cell back: with a cell reserved
// per large sender, the reserved cells could leave a waiter too few even
// with the peer's ring drained, and nothing moved again. One cell leaves
// enough: a message needs at most a quarter of the ring (EagerLimit) and
// its pad less, and a drained ring has at least half free (the peer owes
// fewer than CreditThreshold cells of credit).
func (c *Conn) expose(ctx context.Context, put func(context.Context) (uint32, error)) (uint32, error) {
	select {
	case c.rdvTurn <- struct{}{}:
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	c.lockTx()
	// The ring only once the connection is known open: Close unmaps a
	// shared end's ring once it holds the tx lock.
	err := c.err()
	if err == nil {
		err = c.waitCredits(ctx, rdvCells, c.cells)
	}
	if err != nil {
		<-c.rdvTurn
		c.unlockTx()
		return 0, err
	}
	c.reserved += rdvCells
	c.unlockTx()
	held := false
	defer func() {
		if !held { // put panicked (SendFunc's fill): the cell and the turn go back all the same
			c.lockTx()
			c.reserved -= rdvCells
			<-c.rdvTurn
			c.unlockTx()
		}
	}()
	slot, err := c.exposeHeld(ctx, put)
	c.lockTx()
	c.reserved -= rdvCells
	<-c.rdvTurn // the next waits for the tx lock, so this request goes first
	held = true
	if err != nil {
		c.unlockTx()
		return 0, err
	}
	return slot, nil
}

// exposeHeld runs put holding the ring against Close, which it releases
// even if put panics.
func (c *Conn) exposeHeld(ctx context.Context, put func(context.Context) (uint32, error)) (uint32, error) {
	c.holdRing()
	defer c.releaseRing()
	if p := c.broken.Load(); p != nil {
		return 0, *p
	}
	return put(ctx)
}

// sendCell is Send for a shared-memory end and a message that fits in its
// header's cell (an immediate put), under the tx lock unless the end is
// exclusive: with a credit in hand and the link up, it puts p with no wait
// and no call through the link interface. It reports false, having done
// nothing, when Send must take the general path.
func (c *Conn) sendCell(p []byte) bool {
	l := c.shm
	// Closure first: a shared end's ring is unmapped once Close holds the
	// tx lock, after it has set broken.
	if c.broken.Load() != nil || l.failed() != nil {
		return false
	}
	if c.cells-(c.txPos-c.consumedGiven(l.txConsumed()))-c.reserved < 1 { // a direct call, not through the interface
		return false
	}
	// One cell never needs a pad: it cannot run past the ring's end. The
	// header is built as its word: a header struct here costs a trip
	// through the stack, where forwarding its fields stalls.
	l.putCell(c.txPos, immediateWord(c.txSeq, len(p), uint32(c.rxDone.Load()>>creditUnit)), p)
	c.txSeq = seqAfter(c.txSeq)
	c.txPos++
	runtime.KeepAlive(c)
	return true
}

// notePeerCredit records the peer's piggybacked progress on our tx ring
// (under rxMu), which only ever grows; senders read it at any time.
func (c *Conn) notePeerCredit(low uint32) {
	if low == c.peerCredLow {
		return
	}
	c.peerCredLow = low
	for {
		old := c.peerCred.Load()
		v := extend(old, low)
		if v <= old || c.peerCred.CompareAndSwap(old, v) {
			return
		}
	}
}

// pollCell is the direct receive path of an exclusive shared-memory end: it
// polls the read position for a while, one load per turn, and returns a
// one-cell data message published there, in place; the caller delivers it
// and then advances past it. Anything else (nothing yet, a longer message, a
// pad, a rendezvous, a corrupt header, a closed end) is left to the general
// path, which also checks it.
func (c *Conn) pollCell() ([]byte, bool) {
	r := c.shm.rxr
	word, seq := r.pubWord(c.rxPos), c.rxSeq&seqMask
	for i := 0; i < 1024; i++ {
		w := atomic.LoadUint64(word)
		if uint32(w&seqMask) != seq {
			continue
		}
		length, ok := immediateLength(w)
		if !ok || c.broken.Load() != nil {
			return nil, false
		}
		c.notePeerCredit(uint32(w >> 48))
		return r.payload(c.rxPos, length), true
	}
	return nil, false
}

// The tx and rx locks are taken only when several goroutines may send or
// receive at once (not Config.Exclusive).
func (c *Conn) lockTx() {
	if !c.cfg.Exclusive {
		c.txMu.Lock()
	}
}

func (c *Conn) unlockTx() {
	if !c.cfg.Exclusive {
		c.txMu.Unlock()
	}
}

func (c *Conn) lockRx() {
	if !c.cfg.Exclusive {
		c.rxMu.Lock()
	}
}

func (c *Conn) unlockRx() {
	if !c.cfg.Exclusive {
		c.rxMu.Unlock()
	}
}

// holdRing read-holds inUse, so that Close unmaps the ring only once the
// caller has left; an exclusive end's ring outlives Close instead.
func (c *Conn) holdRing() {
	if !c.cfg.Exclusive {
		c.inUse.RLock()
	}
}

func (c *Conn) releaseRing() {
	if !c.cfg.Exclusive {
		c.inUse.RUnlock()
	}
	runtime.KeepAlive(c)
}

// TrySend sends p only if it can do so at once: an eager message with the
// credits it needs already in hand, and no other sender holding the ring.
// It never waits; it reports whether p was sent.
func (c *Conn) TrySend(p []byte) (bool, error) {
	// The ring is read only under the tx lock: Close unmaps a shared
	// end's ring once it holds that lock (after setting broken), so a
	// check of the peer's closed word before taking it could read
	// unmapped memory (a SIGSEGV seen under -race).
	if p := c.broken.Load(); p != nil {
		return false, *p
	}
	if len(p) > c.cfg.EagerLimit {
		return false, nil
	}
	if !c.cfg.Exclusive && !c.txMu.TryLock() {
		return false, nil
	}
	if err := c.err(); err != nil {
		c.unlockTx()
		return false, err
	}
	if c.shm != nil && len(p) <= Immediate && c.sendCell(p) {
		c.unlockTx()
		return true, nil
	}
	need := cellsFor(len(p))
	pad := uint64(0)
	if off := c.txPos & (c.cells - 1); off+need > c.cells {
		pad = c.cells - off
	}
	if c.cells-(c.txPos-c.consumedKnown())-c.reserved < need+pad {
		c.unlockTx()
		return false, nil
	}
	err := c.sendLocked(context.Background(), kindData, p)
	c.unlockTx()
	if err != nil {
		return false, err
	}
	if err := c.l.flushTx(); err != nil {
		return false, c.flushFailed(err)
	}
	runtime.KeepAlive(c)
	return true, nil
}

// sendLocked places one message on the ring (under txMu).
func (c *Conn) sendLocked(ctx context.Context, kind uint8, p []byte) error {
	need := cellsFor(len(p))
	if err := c.err(); err != nil {
		return err
	}
	cells := c.cells
	pad := uint64(0)
	if off := c.txPos & (cells - 1); off+need > cells {
		pad = cells - off
	}
	if err := c.waitCredits(ctx, need+pad, cells); err != nil {
		return err
	}
	if pad > 0 {
		// A pad's length counts the cells to the end of the ring.
		h := header{seq: c.txSeq, length: uint32(pad), kind: kindPad}
		if err := c.l.put(c.txPos, h, nil); err != nil {
			return c.fail(err)
		}
		c.txSeq = seqAfter(c.txSeq)
		c.txPos += pad
	}
	// The credit field is 16 bits on every provider: the peer widens it
	// against what it knows (extend), and refuses anything wider.
	credit := uint32(c.rxDone.Load()>>creditUnit) & creditMask
	h := header{seq: c.txSeq, length: uint32(len(p)), credit: credit, kind: kind, flags: flagCredit}
	if err := c.l.put(c.txPos, h, p); err != nil {
		return c.fail(err)
	}
	c.txSeq = seqAfter(c.txSeq)
	c.txPos += need
	return nil
}

// waitCredits blocks until n cells are free beside those reserved,
// honouring ctx and the peer's death.
func (c *Conn) waitCredits(ctx context.Context, n, cells uint64) error {
	if cells-(c.txPos-c.consumedKnown())-c.reserved >= n {
		return nil
	}
	c.creditLog.Add(1)
	if err := c.l.flushTx(); err != nil {
		return c.flushFailed(err)
	}
	if err := c.l.waitTx(ctx, func() bool { return cells-(c.txPos-c.consumedKnown())-c.reserved >= n }); err != nil {
		return err
	}
	// The wait also ends when the peer closes (it will free nothing more):
	// a message put now would never be taken, and Send must not say it was.
	return c.err()
}

// backoff polls cond until it holds, ctx ends or check fails (shared-memory
// links): for spin polls first (forever if spin < 0), then yielding, then
// sleeping longer each time. A receiver that keeps up returns credits (or
// frees a slot) within microseconds, while a sleep costs tens of them: a
// sender that slept while streaming let its receiver drain the ring and
// park, and throughput collapsed to a third.
func backoff(ctx context.Context, spin int, cond func() bool, check func() error) error {
	for i := 0; spin < 0 || i < spin; i++ {
		if cond() {
			return nil
		}
		if i&255 == 255 {
			if err := check(); err != nil {
				return err
			}
			if err := ctx.Err(); err != nil {
				return err
			}
			runtime.Gosched()
		}
	}
	sleep := time.Microsecond
	for i := 0; ; i++ {
		if cond() {
			return nil
		}
		if err := check(); err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if i < 200 {
			runtime.Gosched()
			continue
		}
		time.Sleep(sleep)
		sleep = min(2*sleep, time.Millisecond)
	}
}

// Recv receives the next message, appending it to dst[:0].
func (c *Conn) Recv(ctx context.Context, dst []byte) ([]byte, error) {
	// The direct path first, as in RecvFunc; here without a closure, which
	// cost a one-cell message a quarter of its receive.
	if c.direct {
		if p, ok := c.pollCell(); ok {
			dst = append(dst[:0], p...)
			c.advance(1)
			runtime.KeepAlive(c)
			return dst, nil
		}
	}
	into := appenders.Get().(*appender)
	into.out = dst[:0]
	_, err := c.recv(ctx, into.put, true)
	out := into.out
	into.out = nil
	appenders.Put(into)
	return out, err
}

// appender collects a received message for Recv. A closure over Recv's
// result escaped to the heap on every receive that had to wait; pooled
// appenders, their method value made once, cost none.
type appender struct {
	out []byte
	put func(p []byte) error // out = append(out, p...), bound once
}

var appenders = sync.Pool{New: func() any {
	a := &appender{}
	a.put = func(p []byte) error {
		a.out = append(a.out, p...)
		return nil
	}
	return a
}}

// RecvFunc receives the next message and hands it to fn in place, in the
// ring or the rendezvous area, with no copy. p is valid only until fn
// returns; fn must not call Recv, RecvFunc or Poll. fn's error is returned
// (the message counts as received either way).
func (c *Conn) RecvFunc(ctx context.Context, fn func(p []byte) error) error {
	// An exclusive end polls for a one-cell message on the direct path;
	// the general one (recv) then spins its own budget and parks.
	if c.direct {
		if p, ok := c.pollCell(); ok {
			err := fn(p)
			c.advance(1)
			runtime.KeepAlive(c)
			return err
		}
	}
	_, err := c.recv(ctx, fn, true)
	return err
}

// Poll receives a message if one arrives while it polls (for the spin
// budget, Config.Spin), handing it to fn as RecvFunc does; it never parks.
// It reports whether it received one. Poll lets a goroutine that waits for
// a reply read the connection itself, while another goroutine waits in Recv
// for everything else: while any goroutine polls, the peer is asked not to
// wake parked receivers (a wake-up is a system call), and the last poller
// to leave wakes them if a message came meanwhile.
func (c *Conn) Poll(fn func(p []byte) error) (bool, error) {
	got, err, pos, seq := c.takeNow(fn)
	if got || err != nil {
		return got, err
	}
	c.holdRing()
	defer c.releaseRing()
	c.beginPoll()
	defer c.endPoll()
	return c.wait(context.Background(), fn, false, pos, seq)
}

// Cork holds back this end's writes to the network until the matching
// Uncork, so that the messages sent meanwhile, by any goroutine, leave
// together in one write: a goroutine answering a burst of requests corks
// while more of the burst is Pending and writes the answers at once. Over
// tcp a write is a system call, and over loopback it also costs the
// kernel's delivery to the peer; elsewhere Cork does nothing (see Corks).
// Messages are still held back at most until a receiver of this end is
// about to wait for the peer, since what they carry may be what the peer
// needs to answer (credits, a finish), and Close writes them in any case.
// Corks nest; every Cork needs its Uncork.
func (c *Conn) Cork() {
	if l, ok := c.l.(*tcpLink); ok {
		l.cork()
	}
}

// Uncork releases a Cork; the last writes what was held back, and
// returns the write's error as Send would.
func (c *Conn) Uncork() error {
	if l, ok := c.l.(*tcpLink); ok {
		if err := l.uncork(); err != nil {
			return c.flushFailed(err)
		}
	}
	return nil
}

// Corks reports whether Cork changes anything on this end (tcp).
func (c *Conn) Corks() bool {
	_, ok := c.l.(*tcpLink)
	return ok
}

// Pending reports whether a message has reached this end and can be
// received now without waiting. It never waits, nor reads a socket: over
// tcp it sees what a receive already read from the socket, which takes all
// that had arrived, so a burst that came together is pending after its
// first message is received.
func (c *Conn) Pending() bool {
	c.holdRing()
	defer c.releaseRing()
	if c.broken.Load() != nil {
		return false
	}
	if l, ok := c.l.(*tcpLink); ok {
		l.applyBuffered()
	}
	c.lockRx()
	pos, seq := c.rxPos, c.rxSeq
	c.unlockRx()
	_, ok := c.l.rx().peek(pos, seq)
	return ok
}

// Polls reports whether Poll is worth calling: on shared memory a poll is
// a load; over tcp whoever parks reads the socket, and polling the local
// image of the ring only burns a processor.
func (c *Conn) Polls() bool { return c.l.cheapPolls() }

// BeginPoll starts a polling session, which EndPoll must end: from now on
// the peer does not wake parked receivers, as while Poll runs. A goroutine
// about to send a request and poll for its reply begins the session before
// sending, so a quick reply costs the peer no wake-up call.
func (c *Conn) BeginPoll() {
	c.holdRing()
	defer c.releaseRing()
	c.beginPoll()
}

// beginPoll is BeginPoll under inUse: after Close the ring may be unmapped,
// and only the count is kept, so that EndPoll balances it.
func (c *Conn) beginPoll() {
	if c.pollers.Add(1) == 1 && c.broken.Load() == nil {
		c.l.polling(true)
	}
}

// EndPoll ends a polling session; the last to end wakes a parked receiver
// if a message came meanwhile.
func (c *Conn) EndPoll() {
	// A read lock is not reentrant once Close waits for the write lock:
	// Poll, which holds it, calls endPoll.
	c.holdRing()
	defer c.releaseRing()
	c.endPoll()
}

func (c *Conn) endPoll() {
	if c.pollers.Add(-1) != 0 || c.parking.Load() == 0 {
		return
	}
	if c.broken.Load() != nil {
		return
	}
	c.rxMu.Lock()
	pos, seq := c.rxPos, c.rxSeq
	c.rxMu.Unlock()
	c.l.polling(false)
	if _, ok := c.l.rx().peek(pos, seq); ok {
		c.l.wakeSelf()
	}
}

// takeNow takes a message already published, if any, and returns where the
// next one will be.
func (c *Conn) takeNow(deliver func(p []byte) error) (got bool, err error, pos uint64, seq uint32) {
	c.lockRx()
	defer c.unlockRx()
	// Only this end's own closure stops a receive here: what a peer
	// published before it closed or died is still delivered.
	if p := c.broken.Load(); p != nil {
		return false, *p, 0, 0
	}
	got, err = c.take(c.l.rx(), deliver)
	return got, err, c.rxPos, c.rxSeq
}

// recv takes one message. The rx lock is held only while a message is
// taken, not while waiting for one, so receivers can wait side by side:
// each spins, then a blocking one parks (one parker at a time). Waiting
// receivers read-hold inUse, so Close unmaps the ring only after they left.
func (c *Conn) recv(ctx context.Context, deliver func(p []byte) error, block bool) (bool, error) {
	got, err, pos, seq := c.takeNow(deliver)
	if got || err != nil {
		return got, err
	}
	c.holdRing() // once: a read lock is not reentrant while Close waits
	defer c.releaseRing()
	return c.wait(ctx, deliver, block, pos, seq)
}

// wait is the waiting part of recv and Poll, under inUse, for the message
// due at pos (where takeNow found nothing).
func (c *Conn) wait(ctx context.Context, deliver func(p []byte) error, block bool, pos uint64, seq uint32) (bool, error) {
	// Close may have unmapped the ring before the read lock was taken.
	if p := c.broken.Load(); p != nil {
		return false, *p
	}
	r := c.l.rx()
	for {
		// A blocking receiver leaves the spinning to pollers, if any.
		if (!block || c.pollers.Load() == 0) && c.spinFor(r, pos, seq, block) {
		} else if !block {
			return false, c.err()
		} else if err := c.park(ctx, r, pos, seq); err != nil {
			// Deliver what arrived before the failure.
			if got, terr, _, _ := c.takeNow(deliver); got || terr != nil {
				return got, terr
			}
			return false, err
		}
		var got bool
		var err error
		if got, err, pos, seq = c.takeNow(deliver); got || err != nil {
			return got, err
		}
	}
}

// take delivers the next message if it has been published, skipping pads
// (under rxMu).
func (c *Conn) take(r *ring, deliver func(p []byte) error) (bool, error) {
	for {
		w := atomic.LoadUint64(r.pubWord(c.rxPos))
		if uint32(w&seqMask) != c.rxSeq&seqMask {
			return false, nil // not yet published: a cell from an earlier lap
		}
		// A one-cell data message needs no further check: it fits the ring
		// and the eager limit (at least Immediate).
		if length, ok := immediateLength(w); ok {
			c.notePeerCredit(uint32(w >> 48))
			err := deliver(r.payload(c.rxPos, length))
			c.advance(1)
			return true, err
		}
		h := unpack(w)
		if err := r.validate(c.rxPos, h, c.cfg.EagerLimit); err != nil {
			return false, c.fail(err)
		}
		if h.flags&flagCredit != 0 {
			c.notePeerCredit(h.credit)
		}
		n := h.cells()
		switch h.kind {
		case kindPad:
			r.clearInner(c.rxPos, n)
			c.advance(n)
			continue
		case kindData:
			err := deliver(r.payload(c.rxPos, h.length))
			r.clearInner(c.rxPos, n)
			c.advance(n)
			return true, err
		}
		b := r.payload(c.rxPos, 8)
		slot, size := binary.LittleEndian.Uint32(b), binary.LittleEndian.Uint32(b[4:])
		if int(size) > c.cfg.MaxMessage {
			return false, c.fail(&CorruptError{Cell: c.rxPos, Why: fmt.Sprintf("rendezvous of %d bytes above the limit", size)})
		}
		p, err := c.l.bulkView(slot, size)
		if err != nil {
			return false, c.fail(err)
		}
		c.advance(n)
		err = deliver(p)
		if ferr := c.l.bulkFree(slot); ferr != nil {
			// The message was delivered: its finish failing (the peer
			// closed or died meanwhile) is for later calls to report, as
			// the link keeps it. Returned here, it made the caller drop a
			// message it had received.
			c.flushFailed(ferr)
		}
		return true, err
	}
}

// slowErr also asks the link to check its peer's liveness (heartbeats),
// which costs a clock read: only paths that already wait call it.
func (c *Conn) slowErr() error {
	if err := c.err(); err != nil {
		return err
	}
	return c.l.checkPeer()
}

// advance consumes n cells and returns credits once past the threshold. The
// progress piggybacked on sends is published lazily: a sequentially
// consistent store per message would cost as much as the message.
func (c *Conn) advance(n uint64) {
	c.rxPos += n
	c.rxSeq = seqAfter(c.rxSeq)
	returning := c.rxPos-c.rxReported >= c.cfg.CreditThreshold
	// rxDone never lags what the peer was told: a tcp reader checks puts against it.
	if returning || c.rxPos-c.doneStored >= 32 {
		c.doneStored = c.rxPos
		c.rxDone.Store(c.rxPos)
	}
	if returning {
		c.rxReported = c.rxPos
		c.l.returnCredits(c.rxPos)
	}
}

// spinFor polls until message seq is published at pos (or was, and another
// receiver took it), for the link's spin budget. It reports false when the
// budget ran out or the connection failed.
func (c *Conn) spinFor(r *ring, pos uint64, seq uint32, block bool) bool {
	spin := c.l.spin(c.cfg.Spin)
	if spin < 0 && !block {
		spin = defaultSpin // Poll returns: its caller has a context to check
	}
	for i := 0; spin < 0 || i < spin; i++ {
		if _, ok := r.peek(pos, seq); ok {
			return true
		}
		if i&255 == 255 {
			if c.err() != nil {
				return false
			}
			runtime.Gosched()
		}
	}
	return false
}

// park waits, one parker at a time, until message seq is published at pos.
// Before parking on shared memory it returns every unreported credit, which
// costs a store. Over tcp that would cost a write per message, and it is not
// needed for progress: a message plus its pad takes under half the ring
// (EagerLimit is at most a quarter) and unreported credit is below
// CreditThreshold (at most half), so a sender always finds room once the
// receiver has caught up. Over the fabric it would cost an RMA write, a
// message of its own: a 56-byte ping-pong over libfabric's net spent 29%
// of its processor time returning credits before each park.
func (c *Conn) park(ctx context.Context, r *ring, pos uint64, seq uint32) error {
	c.parkMu.Lock()
	defer c.parkMu.Unlock()
	c.rxMu.Lock()
	if c.rxPos != pos {
		c.rxMu.Unlock()
		return nil // another receiver took it meanwhile
	}
	if c.rxPos != c.doneStored {
		c.doneStored = c.rxPos
		c.rxDone.Store(c.rxPos)
	}
	if c.rxPos != c.rxReported && c.l.cheapCredits() {
		c.rxReported = c.rxPos
		if err := c.l.returnCredits(c.rxPos); err != nil {
			c.rxMu.Unlock()
			return c.fail(err)
		}
	}
	c.rxMu.Unlock()
	c.parking.Add(1)
	defer c.parking.Add(-1)
	// Once: after a wake-up the caller looks again from its read position,
	// which another receiver may have moved (pos may even hold a later lap).
	if _, ok := r.peek(pos, seq); ok {
		return nil
	}
	if err := c.slowErr(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	c.parks.Add(1)
	return c.l.park(ctx, pos, seq, c.pollers.Load() == 0)
}

// Close closes the connection: pending and later calls on both ends fail.
// It waits for this end's running Send and Recv calls to return.
func (c *Conn) Close() error {
	c.closeOnce.Do(func() {
		closed := ErrClosed
		c.broken.CompareAndSwap(nil, &closed)
		c.l.shutdown()
		c.txMu.Lock()
		c.inUse.Lock() // before rxMu: a waiting receiver takes them in this order
		c.rxMu.Lock()
		var lingering *Conn
		if c.cfg.Exclusive {
			lingering = c
		}
		c.closeErr = c.l.release(lingering)
		c.rxMu.Unlock()
		c.inUse.Unlock()
		c.txMu.Unlock()
	})
	return c.closeErr
}
