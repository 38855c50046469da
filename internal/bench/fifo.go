// Package bench measures rrefkit's transports against peers on the same
// machine in the same run: the numbers are only ever read as ratios, since
// shared hosts swing by several times between minutes.
package bench

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rrefkit/rref/fifo"
)

// inPlace is implemented by ends that can hand a message over without a copy.
type inPlace interface {
	RecvFunc(ctx context.Context, fn func(p []byte) error) error
}

// end is one side of a measured transport.
type end interface {
	Send(ctx context.Context, p []byte) error
	Recv(ctx context.Context, dst []byte) ([]byte, error)
	Close() error
}

// Transport makes a connected pair for one measurement.
type Transport struct {
	Name string
	Pair func() (end, end, error)
}

// streamEnd frames messages with a 4-byte length over a byte stream (the peers:
// Unix domain sockets and TCP loopback).
type streamEnd struct {
	c  net.Conn
	br *bufio.Reader
	wb []byte
}

func newStreamEnd(c net.Conn) *streamEnd {
	return &streamEnd{c: c, br: bufio.NewReaderSize(c, 1<<20)}
}

func (s *streamEnd) Send(_ context.Context, p []byte) error {
	s.wb = binary.LittleEndian.AppendUint32(s.wb[:0], uint32(len(p)))
	s.wb = append(s.wb, p...)
	_, err := s.c.Write(s.wb)
	return err
}

func (s *streamEnd) Recv(_ context.Context, dst []byte) ([]byte, error) {
	var h [4]byte
	if _, err := io.ReadFull(s.br, h[:]); err != nil {
		return dst, err
	}
	n := int(binary.LittleEndian.Uint32(h[:]))
	if cap(dst) < n {
		dst = make([]byte, n)
	}
	dst = dst[:n]
	_, err := io.ReadFull(s.br, dst)
	return dst, err
}

func (s *streamEnd) Close() error { return s.c.Close() }

func socketPair(network, addr string) (end, end, error) {
	ln, err := net.Listen(network, addr)
	if err != nil {
		return nil, nil, err
	}
	defer ln.Close()
	type res struct {
		c   net.Conn
		err error
	}
	ch := make(chan res, 1)
	go func() {
		c, err := ln.Accept()
		ch <- res{c, err}
	}()
	c, err := net.Dial(network, ln.Addr().String())
	if err != nil {
		return nil, nil, err
	}
	r := <-ch
	if r.err != nil {
		c.Close()
		return nil, nil, r.err
	}
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
		r.c.(*net.TCPConn).SetNoDelay(true)
	}
	return newStreamEnd(c), newStreamEnd(r.c), nil
}

// chanEnd is a Go channel carrying copies (the in-process peer).
type chanEnd struct {
	out, in chan []byte
}

func (c *chanEnd) Send(_ context.Context, p []byte) error {
	c.out <- append([]byte(nil), p...)
	return nil
}

func (c *chanEnd) Recv(_ context.Context, dst []byte) ([]byte, error) {
	p, ok := <-c.in
	if !ok {
		return dst, io.EOF
	}
	return append(dst[:0], p...), nil
}

func (c *chanEnd) Close() error { return nil }

var shmSeq atomic.Int64

// shmPair connects two ends over a fresh shared-memory file.
func shmPair(cfg fifo.Config) func() (end, end, error) {
	return func() (end, end, error) {
		name := fmt.Sprintf("rref-bench-%d-%d", os.Getpid(), shmSeq.Add(1))
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		var a *fifo.Conn
		var err error
		done := make(chan struct{})
		go func() { defer close(done); a, err = fifo.ListenSHM(ctx, name, benchSecret, cfg) }()
		b, derr := fifo.DialSHM(ctx, name, benchSecret, cfg)
		<-done
		if err != nil || derr != nil {
			return nil, nil, fmt.Errorf("%v %v", err, derr)
		}
		return a, b, nil
	}
}

var benchSecret = []byte("bench")

// Transports returns every transport measured, fifo's first.
func Transports() []Transport {
	cfg := fifo.Config{MaxMessage: 4 << 20} // the default ring: 4096 cells, 256 KiB, which fits in L2
	exclusive := cfg
	exclusive.Exclusive = true // each end has one sending and one receiving goroutine here
	secret := []byte("bench")
	return []Transport{
		{"fifo/shm", shmPair(cfg)},
		{"fifo/shm exclusive", shmPair(exclusive)},
		{"fifo/tcp", func() (end, end, error) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				return nil, nil, err
			}
			defer ln.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			var a *fifo.Conn
			done := make(chan struct{})
			go func() { defer close(done); a, err = fifo.AcceptTCP(ctx, ln, secret, cfg) }()
			b, derr := fifo.DialTCP(ctx, ln.Addr().String(), secret, cfg)
			<-done
			if err != nil || derr != nil {
				return nil, nil, fmt.Errorf("%v %v", err, derr)
			}
			return a, b, nil
		}},
		{"fifo/mem", func() (end, end, error) {
			a, b, err := fifo.Pipe(cfg)
			return a, b, err
		}},
		{"unix socket", func() (end, end, error) {
			dir, err := os.MkdirTemp("", "rref-bench")
			if err != nil {
				return nil, nil, err
			}
			defer os.RemoveAll(dir)
			return socketPair("unix", filepath.Join(dir, "s"))
		}},
		{"tcp loopback", func() (end, end, error) { return socketPair("tcp", "127.0.0.1:0") }},
		{"go channel", func() (end, end, error) {
			ab, ba := make(chan []byte, 256), make(chan []byte, 256)
			return &chanEnd{out: ab, in: ba}, &chanEnd{out: ba, in: ab}, nil
		}},
	}
}

// PingPong measures one-way latency (round trip / 2) at size bytes for about d.
func PingPong(t Transport, size int, d time.Duration) (time.Duration, error) {
	a, b, err := t.Pair()
	if err != nil {
		return 0, err
	}
	defer a.Close()
	defer b.Close()
	ctx := context.Background()
	errc := make(chan error, 1)
	stop := make(chan struct{})
	go func() {
		var buf []byte
		var err error
		for {
			if buf, err = b.Recv(ctx, buf); err != nil {
				errc <- nil
				return
			}
			if len(buf) == 0 {
				errc <- nil
				return
			}
			if err = b.Send(ctx, buf); err != nil {
				errc <- err
				return
			}
		}
	}()
	msg := make([]byte, max(size, 1))
	var buf []byte
	rounds := 0
	warm := 20
	var start time.Time
	for {
		if rounds == warm {
			start = time.Now()
		}
		if err := a.Send(ctx, msg); err != nil {
			return 0, err
		}
		if buf, err = a.Recv(ctx, buf); err != nil {
			return 0, err
		}
		rounds++
		if rounds > warm && rounds%16 == 0 && time.Since(start) > d {
			break
		}
	}
	elapsed := time.Since(start)
	a.Send(ctx, nil) // tells the echo to stop
	close(stop)
	<-errc
	return elapsed / time.Duration(2*(rounds-warm)), nil
}

// Stream measures one-way throughput of size-byte messages for about d:
// messages per second and bytes per second.
func Stream(t Transport, size int, d time.Duration) (float64, float64, error) {
	a, b, err := t.Pair()
	if err != nil {
		return 0, 0, err
	}
	defer a.Close()
	defer b.Close()
	ctx, cancel := context.WithTimeout(context.Background(), d+30*time.Second)
	defer cancel()
	// The flag the sender polls sits on a cache line of its own: shared with
	// a word the receiver writes per message, it would cost a line transfer
	// per message and measure false sharing instead of the transport.
	stop := new(struct {
		_       [64]byte
		stopped atomic.Bool
		_       [60]byte
	})
	stopped := &stop.stopped
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		msg := make([]byte, size)
		for !stopped.Load() {
			if a.Send(ctx, msg) != nil {
				return
			}
		}
		a.Send(ctx, nil) // the end marker: measured sizes are never empty
	}()
	var buf []byte
	got := int64(0)
	// Ends that can read in place do so for bulk transfers (a user moving
	// megabytes would); every peer here copies into the caller's buffer.
	ip, zeroCopy := b.(inPlace)
	zeroCopy = zeroCopy && size >= 64<<10
	var n int
	count := func(p []byte) error { n = len(p); return nil }
	start := time.Now()
	for {
		if zeroCopy {
			err = ip.RecvFunc(ctx, count)
		} else {
			buf, err = b.Recv(ctx, buf)
			n = len(buf)
		}
		if err != nil {
			return 0, 0, err
		}
		if n == 0 {
			break
		}
		got++
		if got%64 == 0 && !stopped.Load() && time.Since(start) > d {
			stopped.Store(true)
		}
	}
	elapsed := time.Since(start)
	wg.Wait()
	return float64(got) / elapsed.Seconds(), float64(got) * float64(size) / elapsed.Seconds(), nil
}

// CacheLineFloor is the machine's floor for one-way latency: two threads
// handing a counter back and forth through one shared cache line.
func CacheLineFloor(d time.Duration) time.Duration {
	var line struct {
		_ [64]byte
		v atomic.Uint64
		_ [64]byte
	}
	var stop atomic.Bool
	done := make(chan struct{})
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		for !stop.Load() {
			v := line.v.Load()
			if v&1 == 1 {
				line.v.Store(v + 1)
			}
		}
		close(done)
	}()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	rounds := uint64(0)
	start := time.Now()
	for time.Since(start) < d {
		for i := 0; i < 1024; i++ {
			v := line.v.Load()
			line.v.Store(v + 1)
			for line.v.Load() == v+1 {
			}
			rounds++
		}
	}
	elapsed := time.Since(start)
	stop.Store(true)
	<-done
	return elapsed / time.Duration(2*rounds)
}

// Memcpy is the machine's floor for bandwidth: bytes per second copying size bytes.
func Memcpy(size int, d time.Duration) float64 {
	src, dst := make([]byte, size), make([]byte, size)
	n := 0
	start := time.Now()
	for time.Since(start) < d {
		for i := 0; i < 16; i++ {
			copy(dst, src)
		}
		n += 16
	}
	return float64(n) * float64(size) / time.Since(start).Seconds()
}
