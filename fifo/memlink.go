package fifo

import (
	"context"
	"fmt"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
)

// bulk is one direction's rendezvous area: slots the sender fills and the
// receiver empties. A slot's state word lives on its own cache line.
type bulk struct {
	states   []byte // slots * Cell
	data     []byte // slots * slotSize
	slots    int
	slotSize int
}

func bulkSize(cfg Config) int { return cfg.BulkSlots*Cell + cfg.BulkSlots*cfg.MaxMessage }

func newBulk(mem []byte, cfg Config) *bulk {
	st := cfg.BulkSlots * Cell
	return &bulk{states: mem[:st], data: mem[st : st+cfg.BulkSlots*cfg.MaxMessage], slots: cfg.BulkSlots, slotSize: cfg.MaxMessage}
}

func (b *bulk) state(i int) *uint32 { return (*uint32)(unsafe.Pointer(&b.states[i*Cell])) }

// layout of one connection's shared memory: both rings, then both bulk areas.
type layout struct {
	ringBytes, bulkBytes, total int
}

func layoutFor(cfg Config) layout {
	r := ringSize(cfg.Cells)
	b := bulkSize(cfg)
	return layout{ringBytes: r, bulkBytes: b, total: 2*r + 2*b}
}

// sides cuts the region into this end's tx and rx rings and bulk areas.
// side 0 is the creator: it sends on ring 0; side 1 sends on ring 1.
func sides(mem []byte, cfg Config, side int) (tx, rx *ring, txb, rxb *bulk, err error) {
	lay := layoutFor(cfg)
	r0, err := newRing(mem[0:lay.ringBytes], cfg.Cells)
	if err != nil {
		return
	}
	r1, err := newRing(mem[lay.ringBytes:2*lay.ringBytes], cfg.Cells)
	if err != nil {
		return
	}
	b0 := newBulk(mem[2*lay.ringBytes:2*lay.ringBytes+lay.bulkBytes], cfg)
	b1 := newBulk(mem[2*lay.ringBytes+lay.bulkBytes:lay.total], cfg)
	if side == 0 {
		return r0, r1, b0, b1, nil
	}
	return r1, r0, b1, b0, nil
}

// alignedBytes allocates n bytes aligned to a cache line.
func alignedBytes(n int) []byte {
	buf := make([]byte, n+Cell)
	off := (Cell - int(uintptr(unsafe.Pointer(&buf[0]))%Cell)) % Cell
	return buf[off : off+n : off+n]
}

// memLink is a link over memory both ends map: a Go slice in one process
// (provider mem) or a shared file mapping (provider shm). A put is a copy into
// the peer's view and the event is the atomic store of the header word.
type memLink struct {
	cfg      Config
	tx, rxr  *ring
	txb, rxb *bulk
	unmap    func() error // unmaps shared memory; nil for mem

	closed    atomic.Bool
	heartbeat bool          // watch the peer's heartbeat (shm)
	local     chan struct{} // provider mem: the reader parks here, not on a futex
	peerLocal chan struct{} // provider mem: the peer's
	stop      chan struct{}
	wg        sync.WaitGroup
	lastBeat  atomic.Uint64
	wakes     atomic.Uint64 // wake-up calls made for the peer
	// txSleeping is the tx ring's word where its reader says it parked.
	txSleeping *uint32
	lastSeen   atomic.Int64 // unix nanos when the beat last changed
	dead       atomic.Bool
	closeOnce  sync.Once
	// watch is the socket a shared-memory connection was handed over on,
	// kept open for its life: the kernel closes it when the peer's process
	// ends, however it ends, so a killed peer is dead at once, while one
	// that is only paused (its socket open) has DeadAfter to beat again.
	watch   net.Conn
	deadWhy atomic.Pointer[error]
}

// watchPeer watches nc for the end of the peer's process (see watch).
func (l *memLink) watchPeer(nc net.Conn) {
	l.watch = nc
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		var b [1]byte
		for {
			if _, err := nc.Read(b[:]); err != nil {
				break // EOF: the peer's process has gone (or shutdown closed nc)
			}
		}
		if !l.closed.Load() {
			err := fmt.Errorf("%w: its process ended", ErrPeerDead)
			l.deadWhy.CompareAndSwap(nil, &err)
			l.dead.Store(true)
			l.wakeSelf() // a parked receiver learns at once
		}
	}()
}

func newMemLink(cfg Config, tx, rx *ring, txb, rxb *bulk, heartbeat bool, unmap func() error) *memLink {
	l := &memLink{cfg: cfg, tx: tx, rxr: rx, txb: txb, rxb: rxb, unmap: unmap, heartbeat: heartbeat, stop: make(chan struct{}),
		txSleeping: tx.u32(offSleeping)}
	if heartbeat {
		l.lastBeat.Store(atomic.LoadUint64(rx.u64(offHeartbeat)))
		l.lastSeen.Store(time.Now().UnixNano())
		l.wg.Add(1)
		go l.beat()
	}
	return l
}

// beat advances this end's heartbeat word so the peer can tell it lives.
func (l *memLink) beat() {
	defer l.wg.Done()
	t := time.NewTicker(l.cfg.Heartbeat)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
			atomic.AddUint64(l.tx.u64(offHeartbeat), 1)
		}
	}
}

func (l *memLink) put(pos uint64, h header, payload []byte) error {
	l.tx.place(pos, h, payload)
	l.tx.publish(pos, h)
	l.wakeIfParked()
	return nil
}

// putCell is put for a one-cell message whose header word is w.
func (l *memLink) putCell(pos uint64, w uint64, payload []byte) {
	off := l.tx.cellOff(pos)
	cell := l.tx.mem[off : off+Cell : off+Cell]
	copy(cell[headerSize:], payload)
	atomic.StoreUint64((*uint64)(unsafe.Pointer(&cell[0])), w)
	if atomic.LoadUint32(l.txSleeping) != 0 { // wakeIfParked, by hand: it is too large to inline
		l.wakeParked()
	}
}

// wakeIfParked wakes the reader after a publication only on an idle-to-busy
// transition: when it said it parked.
func (l *memLink) wakeIfParked() {
	if atomic.LoadUint32(l.txSleeping) != 0 {
		l.wakeParked() // out of line, so that the check inlines into every put
	}
}

func (l *memLink) wakeParked() {
	l.wakes.Add(1)
	l.wakePeer()
}

func (l *memLink) wakeUps() uint64 { return l.wakes.Load() }

func (l *memLink) wakePeer() { wake(l.peerLocal, l.tx) }
func (l *memLink) wakeSelf() { wake(l.local, l.rxr) }

// wake wakes the reader parked on ring r: on its channel in one process
// (provider mem), else on the ring's futex word.
func wake(local chan struct{}, r *ring) {
	if local != nil {
		select {
		case local <- struct{}{}:
		default:
		}
		return
	}
	atomic.AddUint32(r.u32(offWake), 1)
	futexWake(r.u32(offWake))
}

func (l *memLink) flushTx() error     { return nil }
func (l *memLink) txConsumed() uint64 { return atomic.LoadUint64(l.tx.u64(offConsumed)) }
func (l *memLink) rx() *ring          { return l.rxr }
func (l *memLink) returnCredits(v uint64) error {
	atomic.StoreUint64(l.rxr.u64(offConsumed), v)
	return nil
}

func (l *memLink) park(ctx context.Context, pos uint64, seq uint32, wake bool) error {
	w := l.rxr.u32(offWake)
	old := atomic.LoadUint32(w)
	if wake {
		atomic.StoreUint32(l.rxr.u32(offSleeping), 1)
	}
	if _, ok := l.rxr.peek(pos, seq); !ok && l.checkPeer() == nil {
		if l.local != nil {
			// In one process the scheduler should know who waits.
			select {
			case <-l.local:
			case <-ctx.Done():
			case <-l.stop:
			}
		} else {
			wait := 5 * time.Millisecond
			if dl, ok := ctx.Deadline(); ok {
				wait = max(min(wait, time.Until(dl)), time.Microsecond)
			}
			futexWait(w, old, wait)
		}
	}
	atomic.StoreUint32(l.rxr.u32(offSleeping), 0)
	return l.checkPeer()
}

func (l *memLink) polling(on bool) {
	flag := l.rxr.u32(offSleeping)
	if on {
		if atomic.LoadUint32(flag) != 0 {
			atomic.StoreUint32(flag, 0)
		}
		return
	}
	atomic.StoreUint32(flag, 1)
}

func (l *memLink) waitTx(ctx context.Context, cond func() bool) error {
	return backoff(ctx, l.cfg.Spin, cond, l.checkPeer)
}

func (l *memLink) bulkPut(ctx context.Context, p []byte) (uint32, error) {
	slot, dst, err := l.bulkClaim(ctx, len(p))
	if err != nil {
		return 0, err
	}
	copy(dst, p)
	return slot, nil
}

func (l *memLink) bulkClaim(ctx context.Context, n int) (uint32, []byte, error) {
	slot := -1
	err := backoff(ctx, l.cfg.Spin, func() bool {
		for s := 0; s < l.txb.slots; s++ {
			if atomic.CompareAndSwapUint32(l.txb.state(s), 0, 1) {
				slot = s
				return true
			}
		}
		return false
	}, l.checkPeer)
	if err != nil {
		return 0, nil, err
	}
	start := slot * l.txb.slotSize
	return uint32(slot), l.txb.data[start : start+n : start+n], nil
}

func (l *memLink) bulkAbort(slot uint32) { atomic.StoreUint32(l.txb.state(int(slot)), 0) }

func (l *memLink) bulkView(slot uint32, n uint32) ([]byte, error) {
	if int(slot) >= l.rxb.slots || int(n) > l.rxb.slotSize {
		return nil, &CorruptError{Why: fmt.Sprintf("rendezvous slot %d of %d bytes does not exist", slot, n)}
	}
	if atomic.LoadUint32(l.rxb.state(int(slot))) != 1 {
		return nil, &CorruptError{Why: fmt.Sprintf("rendezvous slot %d is not filled", slot)}
	}
	start := int(slot) * l.rxb.slotSize
	return l.rxb.data[start : start+int(n) : start+int(n)], nil
}

// bulkFree is the finish: the sender may reuse the slot.
func (l *memLink) bulkFree(slot uint32) error {
	atomic.StoreUint32(l.rxb.state(int(slot)), 0)
	return nil
}

func (l *memLink) cheapCredits() bool { return true }
func (l *memLink) cheapPolls() bool   { return true }

var errPeerClosed = fmt.Errorf("%w by the peer", ErrClosed)

func (l *memLink) spin(configured int) int { return configured }

func (l *memLink) failed() error {
	if l.closed.Load() {
		return ErrClosed
	}
	if atomic.LoadUint32(l.rxr.u32(offClosed)) != 0 {
		return errPeerClosed
	}
	if l.dead.Load() {
		if p := l.deadWhy.Load(); p != nil {
			return *p
		}
		return ErrPeerDead
	}
	return nil
}

// checkPeer notices a peer whose heartbeat stopped (shm).
func (l *memLink) checkPeer() error {
	if err := l.failed(); err != nil {
		return err
	}
	if l.heartbeat {
		now := time.Now().UnixNano()
		if b := atomic.LoadUint64(l.rxr.u64(offHeartbeat)); b != l.lastBeat.Load() {
			l.lastBeat.Store(b)
			l.lastSeen.Store(now)
		} else if time.Duration(now-l.lastSeen.Load()) > l.cfg.DeadAfter {
			l.dead.Store(true)
			return fmt.Errorf("%w: no heartbeat for %v", ErrPeerDead, l.cfg.DeadAfter)
		}
	}
	return nil
}

func (l *memLink) shutdown() {
	l.closeOnce.Do(func() {
		l.closed.Store(true)
		// Tell the peer and wake both ends, so pending calls fail at once.
		atomic.StoreUint32(l.tx.u32(offClosed), 1)
		l.wakePeer()
		l.wakeSelf()
		close(l.stop)
		if l.watch != nil {
			l.watch.Close() // after the closed flag: the peer sees a close, not a death
		}
	})
}

func (l *memLink) release(lingering *Conn) error {
	l.shutdown()
	l.wg.Wait()
	if l.unmap == nil {
		return nil // Go memory: the collector frees it
	}
	if lingering != nil {
		runtime.AddCleanup(lingering, func(unmap func() error) { unmap() }, l.unmap)
		return nil
	}
	return l.unmap()
}

// Pipe returns the two ends of an in-process connection (provider mem).
func Pipe(cfg Config) (*Conn, *Conn, error) {
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, nil, err
	}
	mem := alignedBytes(layoutFor(c).total)
	tx0, rx0, txb0, rxb0, err := sides(mem, c, 0)
	if err != nil {
		return nil, nil, err
	}
	tx1, rx1, txb1, rxb1, _ := sides(mem, c, 1)
	la := newMemLink(c, tx0, rx0, txb0, rxb0, false, nil)
	lb := newMemLink(c, tx1, rx1, txb1, rxb1, false, nil)
	la.local, lb.local = make(chan struct{}, 1), make(chan struct{}, 1)
	la.peerLocal, lb.peerLocal = lb.local, la.local
	return newConn(la, c), newConn(lb, c), nil
}
