package fifo

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// TCP frames. A put carries one message for the receiver to apply to its local
// image of the sender's ring; credits and rendezvous chunks travel beside the
// ring and never need ring credits.
const (
	framePut    = 1 // pos u64, seq u32, len u32, credit u32, kind u8, flags u8, payload
	frameCredit = 2 // consumed u64
	frameBulk   = 3 // id u32, total u32, off u32, n u32, data
	frameClose  = 4
	frameFinish = 5 // id u32: the receiver copied a rendezvous payload out; its slot is free

	putHeader  = 1 + 8 + 4 + 4 + 4 + 1 + 1
	bulkHeader = 1 + 4*4
	bulkChunk  = 256 << 10
	helloSize  = 8 + 4 + 8 + 4 + 4 + tokenSize
)

type tcpLink struct {
	cfg   Config
	nc    net.Conn
	img   *ring // the local image of the peer's ring, which Recv reads
	rxPos func() uint64

	txCred atomic.Uint64

	wmu     sync.Mutex
	wbuf    []byte
	spare   []byte
	writing bool

	bmu      sync.Mutex
	slots    chan struct{} // rendezvous transfers this end may have outstanding
	nextBulk uint32
	assembly map[uint32][]byte // rendezvous payloads being received
	pending  int               // bytes held in assembly

	closed     atomic.Bool
	peerClosed atomic.Bool
	deadErr    atomic.Pointer[error]
	done       chan struct{}
	notify     chan struct{} // wakes a parked receiver
	closeOnce  sync.Once
}

func (l *tcpLink) setDead(err error) {
	l.deadErr.CompareAndSwap(nil, &err)
	l.wakeLocal()
}

// wakeLocal wakes a parked local receiver: a channel, since both sides are
// goroutines of this process and the scheduler should know who waits.
func (l *tcpLink) wakeLocal() {
	select {
	case l.notify <- struct{}{}:
	default:
	}
}

func (l *tcpLink) appendFrame(f func(b []byte) []byte) {
	l.wmu.Lock()
	l.wbuf = f(l.wbuf)
	l.wmu.Unlock()
}

func (l *tcpLink) put(pos uint64, h header, payload []byte) error {
	l.appendFrame(func(b []byte) []byte {
		b = append(b, framePut)
		b = binary.LittleEndian.AppendUint64(b, pos)
		b = binary.LittleEndian.AppendUint32(b, h.seq)
		b = binary.LittleEndian.AppendUint32(b, h.length)
		b = binary.LittleEndian.AppendUint32(b, h.credit)
		b = append(b, h.kind, h.flags)
		return append(b, payload...)
	})
	return nil
}

// flushTx writes queued frames. Whoever finds no write in progress becomes
// the writer and keeps writing until the queue is empty, so frames queued by
// other senders meanwhile leave together in one write: pipelining.
func (l *tcpLink) flushTx() error {
	l.wmu.Lock()
	if l.writing || len(l.wbuf) == 0 {
		l.wmu.Unlock()
		return l.failedWrite()
	}
	l.writing = true
	for len(l.wbuf) > 0 {
		b := l.wbuf
		l.wbuf = l.spare[:0]
		l.wmu.Unlock()
		_, err := l.nc.Write(b)
		l.wmu.Lock()
		l.spare = b[:0]
		if err != nil {
			l.writing = false
			l.wmu.Unlock()
			l.setDead(fmt.Errorf("%w: %v", ErrPeerDead, err))
			return l.failed()
		}
	}
	l.writing = false
	l.wmu.Unlock()
	return nil
}

func (l *tcpLink) failedWrite() error {
	if p := l.deadErr.Load(); p != nil {
		return *p
	}
	return nil
}

func (l *tcpLink) txConsumed() uint64 { return l.txCred.Load() }
func (l *tcpLink) rx() *ring          { return l.img }

func (l *tcpLink) returnCredits(v uint64) error {
	l.appendFrame(func(b []byte) []byte {
		return binary.LittleEndian.AppendUint64(append(b, frameCredit), v)
	})
	return l.flushTx()
}

func (l *tcpLink) park(ctx context.Context, pos uint64, seq uint32) error {
	atomic.StoreUint32(l.img.u32(offSleeping), 1)
	if _, ok := l.img.peek(pos, seq); !ok && l.failed() == nil {
		select {
		case <-l.notify:
		case <-ctx.Done():
		case <-l.done:
		}
	}
	atomic.StoreUint32(l.img.u32(offSleeping), 0)
	return l.failed()
}

func (l *tcpLink) bulkPut(ctx context.Context, p []byte) (uint32, error) {
	select {
	case l.slots <- struct{}{}:
	case <-ctx.Done():
		return 0, ctx.Err()
	case <-l.done:
		return 0, l.failed()
	}
	l.bmu.Lock()
	l.nextBulk++
	id := l.nextBulk
	l.bmu.Unlock()
	for off := 0; off < len(p) || off == 0; off += bulkChunk {
		chunk := p[off:min(off+bulkChunk, len(p))]
		l.appendFrame(func(b []byte) []byte {
			b = append(b, frameBulk)
			b = binary.LittleEndian.AppendUint32(b, id)
			b = binary.LittleEndian.AppendUint32(b, uint32(len(p)))
			b = binary.LittleEndian.AppendUint32(b, uint32(off))
			b = binary.LittleEndian.AppendUint32(b, uint32(len(chunk)))
			return append(b, chunk...)
		})
		// Flush per chunk, so small messages queued meanwhile go between chunks.
		if err := l.flushTx(); err != nil {
			return 0, err
		}
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		if len(p) == 0 {
			break
		}
	}
	return id, nil
}

func (l *tcpLink) bulkGet(id uint32, n uint32, dst []byte) ([]byte, error) {
	l.bmu.Lock()
	defer l.bmu.Unlock()
	b, ok := l.assembly[id]
	if !ok || len(b) != int(n) {
		return dst, &CorruptError{Why: fmt.Sprintf("rendezvous %d of %d bytes was not received", id, n)}
	}
	delete(l.assembly, id)
	l.pending -= len(b)
	l.appendFrame(func(f []byte) []byte { return binary.LittleEndian.AppendUint32(append(f, frameFinish), id) })
	if err := l.flushTx(); err != nil {
		return dst, err
	}
	return append(dst, b...), nil
}

func (l *tcpLink) checkPeer() error { return l.failed() }

// spin: data reaches a tcp receiver through this process's own reader
// goroutine, so long spinning only steals its core; park early.
func (l *tcpLink) spin(configured int) int { return min(configured, 200) }

func (l *tcpLink) failed() error {
	if l.closed.Load() {
		return ErrClosed
	}
	if l.peerClosed.Load() {
		return fmt.Errorf("%w by the peer", ErrClosed)
	}
	if p := l.deadErr.Load(); p != nil {
		return *p
	}
	return nil
}

func (l *tcpLink) shutdown() {
	l.closeOnce.Do(func() {
		if !l.closed.Load() && l.failed() == nil {
			l.appendFrame(func(b []byte) []byte { return append(b, frameClose) })
			l.nc.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
			l.flushTx()
		}
		l.closed.Store(true)
		l.nc.Close()
		l.wakeLocal()
	})
}

func (l *tcpLink) release() error {
	l.shutdown()
	<-l.done
	return nil
}

// readLoop applies the peer's frames: puts to the local image (published by
// the same atomic store a shared-memory put ends with), credits, rendezvous
// chunks. Any malformed frame is an error that closes the connection.
func (l *tcpLink) readLoop() {
	defer close(l.done)
	br := bufio.NewReaderSize(l.nc, 256<<10)
	var hdr [putHeader]byte
	nextPos, nextSeq := uint64(0), uint32(1)
	fail := func(err error) {
		if errors.Is(err, io.EOF) || l.closed.Load() {
			if !l.peerClosed.Load() && !l.closed.Load() {
				l.setDead(fmt.Errorf("%w: connection lost", ErrPeerDead))
			}
		} else {
			l.setDead(err)
		}
		l.nc.Close()
		l.wakeLocal()
	}
	for {
		t, err := br.ReadByte()
		if err != nil {
			fail(err)
			return
		}
		switch t {
		case framePut:
			if _, err := io.ReadFull(br, hdr[1:]); err != nil {
				fail(err)
				return
			}
			pos := binary.LittleEndian.Uint64(hdr[1:])
			h := header{seq: binary.LittleEndian.Uint32(hdr[9:]), length: binary.LittleEndian.Uint32(hdr[13:]),
				credit: binary.LittleEndian.Uint32(hdr[17:]), kind: hdr[21], flags: hdr[22]}
			if pos != nextPos || h.seq != nextSeq {
				fail(&CorruptError{Cell: pos, Why: fmt.Sprintf("sequence gap: put %d at cell %d, expected %d at %d", h.seq, pos, nextSeq, nextPos)})
				return
			}
			if err := l.img.validate(pos, h, l.cfg.EagerLimit); err != nil {
				fail(err)
				return
			}
			n := h.cells()
			if pos+n-l.rxPos() > l.img.cells {
				fail(&CorruptError{Cell: pos, Why: "the sender overran its credits"})
				return
			}
			body := l.img.payload(pos, h.length)
			if h.kind == kindPad {
				body = body[:0]
			}
			if _, err := io.ReadFull(br, body); err != nil {
				fail(err)
				return
			}
			l.img.place(pos, h, nil)
			l.img.publish(pos, h)
			if atomic.LoadUint32(l.img.u32(offSleeping)) != 0 {
				l.wakeLocal()
			}
			nextPos, nextSeq = pos+n, nextSeq+1
		case frameCredit:
			var b [8]byte
			if _, err := io.ReadFull(br, b[:]); err != nil {
				fail(err)
				return
			}
			v := binary.LittleEndian.Uint64(b[:])
			for old := l.txCred.Load(); v > old && !l.txCred.CompareAndSwap(old, v); old = l.txCred.Load() {
			}
		case frameBulk:
			var b [bulkHeader - 1]byte
			if _, err := io.ReadFull(br, b[:]); err != nil {
				fail(err)
				return
			}
			id, total := binary.LittleEndian.Uint32(b[0:]), binary.LittleEndian.Uint32(b[4:])
			off, n := binary.LittleEndian.Uint32(b[8:]), binary.LittleEndian.Uint32(b[12:])
			l.bmu.Lock()
			buf, ok := l.assembly[id]
			if !ok {
				if int(total) > l.cfg.MaxMessage || len(l.assembly) >= l.cfg.BulkSlots || off != 0 {
					l.bmu.Unlock()
					fail(&CorruptError{Why: fmt.Sprintf("rendezvous %d of %d bytes exceeds the limits", id, total)})
					return
				}
				buf = make([]byte, 0, total)
				l.pending += int(total)
			}
			if int(off) != len(buf) || uint64(off)+uint64(n) > uint64(total) || cap(buf) != int(total) {
				l.bmu.Unlock()
				fail(&CorruptError{Why: fmt.Sprintf("rendezvous %d chunk at %d of %d bytes is out of order", id, off, n)})
				return
			}
			l.bmu.Unlock()
			buf = buf[:off+n]
			if _, err := io.ReadFull(br, buf[off:]); err != nil {
				fail(err)
				return
			}
			l.bmu.Lock()
			l.assembly[id] = buf
			l.bmu.Unlock()
		case frameFinish:
			var b [4]byte
			if _, err := io.ReadFull(br, b[:]); err != nil {
				fail(err)
				return
			}
			select {
			case <-l.slots:
			default:
				fail(&CorruptError{Why: "finish for a rendezvous never sent"})
				return
			}
		case frameClose:
			l.peerClosed.Store(true)
			l.wakeLocal()
		default:
			fail(&CorruptError{Why: fmt.Sprintf("unknown frame type %d", t)})
			return
		}
	}
}

func appendHello(b []byte, cfg Config, token []byte) []byte {
	b = binary.LittleEndian.AppendUint64(b, magic)
	b = binary.LittleEndian.AppendUint32(b, formatVersion)
	b = binary.LittleEndian.AppendUint64(b, cfg.Cells)
	b = binary.LittleEndian.AppendUint32(b, uint32(cfg.EagerLimit))
	b = binary.LittleEndian.AppendUint32(b, uint32(cfg.MaxMessage))
	return append(b, token...)
}

func newTCPLink(nc net.Conn, cfg Config) *Conn {
	if tc, ok := nc.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
	}
	img, _ := newRing(alignedBytes(ringSize(cfg.Cells)), cfg.Cells)
	l := &tcpLink{cfg: cfg, nc: nc, img: img, assembly: map[uint32][]byte{}, done: make(chan struct{}), notify: make(chan struct{}, 1), slots: make(chan struct{}, cfg.BulkSlots)}
	c := newConn(l, cfg)
	l.rxPos = c.rxDone.Load
	go l.readLoop()
	return c
}

func deadline(ctx context.Context, nc net.Conn) {
	if dl, ok := ctx.Deadline(); ok {
		nc.SetDeadline(dl)
	} else {
		nc.SetDeadline(time.Now().Add(10 * time.Second))
	}
}

// DialTCP connects to a peer accepting with AcceptTCP. Both must use the same
// geometry (Cells, EagerLimit, MaxMessage) and secret.
func DialTCP(ctx context.Context, addr string, secret []byte, cfg Config) (*Conn, error) {
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("fifo: dial %s: %w", addr, err)
	}
	deadline(ctx, nc)
	if _, err := nc.Write(appendHello(nil, c, tokenOf(secret))); err != nil {
		nc.Close()
		return nil, fmt.Errorf("fifo: handshake with %s: %w", addr, err)
	}
	var ack [1]byte
	if _, err := io.ReadFull(nc, ack[:]); err != nil || ack[0] != 0 {
		nc.Close()
		return nil, fmt.Errorf("%w by %s", ErrAuth, addr)
	}
	nc.SetDeadline(time.Time{})
	return newTCPLink(nc, c), nil
}

// AcceptTCP accepts one connection on ln and checks its handshake: format
// version, geometry and the secret token. A stray or misconfigured dialer is
// refused and AcceptTCP returns an error.
func AcceptTCP(ctx context.Context, ln net.Listener, secret []byte, cfg Config) (*Conn, error) {
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if dl, ok := ctx.Deadline(); ok {
		if tl, ok := ln.(*net.TCPListener); ok {
			tl.SetDeadline(dl)
			defer tl.SetDeadline(time.Time{})
		}
	}
	nc, err := ln.Accept()
	if err != nil {
		return nil, fmt.Errorf("fifo: accept: %w", err)
	}
	deadline(ctx, nc)
	hello := make([]byte, helloSize)
	if _, err := io.ReadFull(nc, hello); err != nil {
		nc.Close()
		return nil, fmt.Errorf("fifo: handshake from %s: %w", nc.RemoteAddr(), err)
	}
	if string(hello) != string(appendHello(nil, c, tokenOf(secret))) {
		nc.Write([]byte{1})
		nc.Close()
		return nil, fmt.Errorf("%w: %s sent a wrong version, geometry or token", ErrAuth, nc.RemoteAddr())
	}
	if _, err := nc.Write([]byte{0}); err != nil {
		nc.Close()
		return nil, err
	}
	nc.SetDeadline(time.Time{})
	return newTCPLink(nc, c), nil
}
