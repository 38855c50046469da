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
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rrefkit/rref/fifo"
)

// inPlace is implemented by ends that can hand a message over without a copy.
type inPlace interface {
	RecvFunc(ctx context.Context, fn func(p []byte) error) error
}

// inPlaceSend is implemented by ends that let the sender write a message
// where the peer reads it (fifo's SendFunc).
type inPlaceSend interface {
	SendFunc(ctx context.Context, n int, fill func(p []byte) error) error
}

// inPlaceFrom is the size from which a stream moves its messages in place
// where the ends can (bulk transfers: a user moving megabytes would, as
// fi_pingpong sends from and receives into its registered buffers).
const inPlaceFrom = 64 << 10

// streamSender sends a stream's messages of one size: in place from
// inPlaceFrom if inPlace and the end can, the producer writing only a
// sequence number into each, else with Send from one buffer.
func streamSender(e end, size int, inPlace bool) func(ctx context.Context) error {
	msg := make([]byte, size)
	ip, ok := e.(inPlaceSend)
	if !ok || !inPlace || size < inPlaceFrom {
		return func(ctx context.Context) error { return e.Send(ctx, msg) }
	}
	seq := uint64(0)
	stamp := func(p []byte) error {
		seq++
		binary.LittleEndian.PutUint64(p, seq)
		return nil
	}
	return func(ctx context.Context) error { return ip.SendFunc(ctx, size, stamp) }
}

// end is one side of a measured transport.
type end interface {
	Send(ctx context.Context, p []byte) error
	Recv(ctx context.Context, dst []byte) ([]byte, error)
	Close() error
}

// Transport makes connected ends for measurements: a pair in this process,
// or (Proc) our end of a connection to a peer process.
type Transport struct {
	Name string
	Pair func() (end, end, error)
	Proc func() (*procEnd, error)
	// SendInPlace: the stream's sender writes bulk messages where the
	// peer reads them (inPlaceFrom), for a transport that moves the bytes
	// itself (the fabric's RMA read), as fi_pingpong moves its registered
	// buffer. Over shared memory a message sent in place moves no byte:
	// those rows keep Send's copy, which is their transfer.
	SendInPlace bool
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

var benchSecret = []byte("bench")

// Transports returns every transport measured, fifo's first. The fifo/shm
// rows run their second end in another process, as the transport is meant
// to be used (and as the floor is measured); the peers run in one process.
func Transports() []Transport {
	cfg := benchConfig(false)
	secret := []byte("bench")
	ts := []Transport{
		{Name: "fifo/shm", Proc: procPair(cfg)},
		// Each end has one sending and one receiving goroutine here.
		{Name: "fifo/shm exclusive", Proc: procPair(benchConfig(true))},
		{Name: "fifo/tcp", Pair: func() (end, end, error) {
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
	}
	ts = append(ts, fabricTransports(cfg)...) // none in a build without the provider
	return append(ts, []Transport{
		{Name: "fifo/mem", Pair: func() (end, end, error) {
			a, b, err := fifo.Pipe(cfg)
			return a, b, err
		}},
		{Name: "unix socket", Pair: func() (end, end, error) {
			dir, err := os.MkdirTemp("", "rref-bench")
			if err != nil {
				return nil, nil, err
			}
			defer os.RemoveAll(dir)
			return socketPair("unix", filepath.Join(dir, "s"))
		}},
		{Name: "tcp loopback", Pair: func() (end, end, error) { return socketPair("tcp", "127.0.0.1:0") }},
		{Name: "go channel", Pair: func() (end, end, error) {
			ab, ba := make(chan []byte, 256), make(chan []byte, 256)
			return &chanEnd{out: ab, in: ba}, &chanEnd{out: ba, in: ab}, nil
		}},
	}...)
}

// pair makes a fresh pair, then collects garbage: a fifo pair maps megabytes
// of bulk slots, and a collection that started inside the measurement
// would take one of the two processors the measurement spins on (it halved
// fifo/mem's 8-byte rate, the first cell after the latency cells).
func (t Transport) pair() (end, end, error) {
	a, b, err := t.Pair()
	if err == nil {
		runtime.GC()
	}
	return a, b, err
}

// rig runs one transport's measurements: a fresh pair for each in this
// process, or one connection to a peer process for all of them (a process
// is measured warm, not while it starts).
type rig struct {
	t    Transport
	proc *procEnd
}

func (t Transport) open() (*rig, error) {
	r := &rig{t: t}
	if t.Proc != nil {
		p, err := t.Proc()
		if err != nil {
			return nil, err
		}
		r.proc = p
	}
	return r, nil
}

func (r *rig) close() error {
	if r.proc != nil {
		return r.proc.Close()
	}
	return nil
}

// PingPong measures one-way latency (round trip / 2) at size bytes for about d.
func PingPong(t Transport, size int, d time.Duration) (time.Duration, error) {
	r, err := t.open()
	if err != nil {
		return 0, err
	}
	defer r.close()
	return r.pingPong(size, d)
}

// Stream measures one-way throughput of size-byte messages for about d:
// messages per second and bytes per second.
func Stream(t Transport, size int, d time.Duration) (float64, float64, error) {
	r, err := t.open()
	if err != nil {
		return 0, 0, err
	}
	defer r.close()
	return r.stream(size, d)
}

func (r *rig) pingPong(size int, d time.Duration) (time.Duration, error) {
	return r.pingPongTimed(size, d, nil)
}

// pingPongTimed is pingPong, appending each round trip's one-way latency
// to *samples when samples is not nil.
func (r *rig) pingPongTimed(size int, d time.Duration, samples *[]time.Duration) (time.Duration, error) {
	ctx := context.Background()
	if r.proc != nil {
		a := r.proc
		if err := a.Send(ctx, []byte{cmdEcho}); err != nil {
			return 0, err
		}
		lat, err := pingPongFrom(a, size, d, samples)
		if err == nil {
			_, err = a.Recv(ctx, nil) // the stop, echoed: the peer waits for a command again
		}
		return lat, err
	}
	a, b, err := r.t.pair()
	if err != nil {
		return 0, err
	}
	defer a.Close()
	defer b.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		var buf []byte
		var err error
		for {
			if buf, err = b.Recv(ctx, buf); err != nil || len(buf) == 0 {
				return
			}
			if b.Send(ctx, buf) != nil {
				return
			}
		}
	}()
	lat, err := pingPongFrom(a, size, d, samples)
	if err == nil {
		<-done // stopped by the empty message; on an error, closing the ends stops it
	}
	return lat, err
}

// pingPongFrom bounces size-byte messages off an echo at a's other end for
// about d, then sends the echo an empty message, which stops it.
func pingPongFrom(a end, size int, d time.Duration, samples *[]time.Duration) (time.Duration, error) {
	ctx := context.Background()
	msg := make([]byte, max(size, 1))
	var buf []byte
	var err error
	rounds := 0
	warm := 20
	var start, sent time.Time
	for {
		if rounds == warm {
			start = time.Now()
		}
		if samples != nil {
			sent = time.Now()
		}
		if err = a.Send(ctx, msg); err != nil {
			return 0, err
		}
		if buf, err = a.Recv(ctx, buf); err != nil {
			return 0, err
		}
		if samples != nil && rounds >= warm && len(*samples) < maxSamples {
			*samples = append(*samples, time.Since(sent)/2)
		}
		rounds++
		if rounds > warm && rounds%16 == 0 && time.Since(start) > d {
			break
		}
	}
	elapsed := time.Since(start)
	if err := a.Send(ctx, nil); err != nil {
		return 0, err
	}
	return elapsed / time.Duration(2*(rounds-warm)), nil
}

// percentileWarmUp is how long LatencyPercentiles bounces messages
// before it times them.
const percentileWarmUp = 100 * time.Millisecond

// maxSamples bounds the round trips a percentile measurement keeps (8 MB).
const maxSamples = 1 << 20

// LatencyPercentiles bounces size-byte messages for about d and returns
// the median and the 99th percentile of the one-way latency, each round
// trip timed and halved: a transport's tail, which a mean hides.
func LatencyPercentiles(t Transport, size int, d time.Duration) (p50, p99 time.Duration, err error) {
	r, err := t.open()
	if err != nil {
		return 0, 0, err
	}
	defer r.close()
	// Unmeasured round trips first: a new process and connection run
	// slower for their first tens of milliseconds (the runtime sizing its
	// heap, its monitor's first checks, page faults on the rings), which
	// made most of a short run's 99th percentile (11-16x the median over
	// the first 50 ms of the fabric row, 2-8x after).
	if _, err := r.pingPong(size, percentileWarmUp); err != nil {
		return 0, 0, err
	}
	samples := make([]time.Duration, 0, 4096)
	if _, err := r.pingPongTimed(size, d, &samples); err != nil {
		return 0, 0, err
	}
	if len(samples) == 0 {
		return 0, 0, fmt.Errorf("bench: %s: no round trip in %v", t.Name, d)
	}
	slices.Sort(samples)
	return samples[len(samples)/2], samples[len(samples)*99/100], nil
}

func (r *rig) stream(size int, d time.Duration) (float64, float64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d+30*time.Second)
	defer cancel()
	if r.proc != nil {
		b := r.proc
		start := time.Now()
		if err := b.Send(ctx, streamCommand(size, d, r.t.SendInPlace)); err != nil {
			return 0, 0, err
		}
		got, err := receiveAll(ctx, b, size, func() {})
		elapsed := time.Since(start)
		return float64(got) / elapsed.Seconds(), float64(got) * float64(size) / elapsed.Seconds(), err
	}
	a, b, err := r.t.pair()
	if err != nil {
		return 0, 0, err
	}
	defer a.Close()
	defer b.Close()
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
		send := streamSender(a, size, r.t.SendInPlace)
		for !stopped.Load() {
			if send(ctx) != nil {
				return
			}
		}
		a.Send(ctx, nil) // the end marker: measured sizes are never empty
	}()
	start := time.Now()
	got, err := receiveAll(ctx, b, size, func() {
		if !stopped.Load() && time.Since(start) > d {
			stopped.Store(true)
		}
	})
	elapsed := time.Since(start)
	if err == nil {
		wg.Wait() // it sent the end marker; on an error, closing the ends stops it
	} else {
		stopped.Store(true)
	}
	return float64(got) / elapsed.Seconds(), float64(got) * float64(size) / elapsed.Seconds(), err
}

// receiveAll receives messages until an empty one, calling every64 after
// every 64th, and returns how many it received.
func receiveAll(ctx context.Context, b end, size int, every64 func()) (int64, error) {
	var buf []byte
	var err error
	got := int64(0)
	// Ends that can read in place do so for bulk transfers (inPlaceFrom);
	// every peer here copies into the caller's buffer.
	ip, zeroCopy := b.(inPlace)
	zeroCopy = zeroCopy && size >= inPlaceFrom
	var n int
	count := func(p []byte) error { n = len(p); return nil }
	for {
		if zeroCopy {
			err = ip.RecvFunc(ctx, count)
		} else {
			buf, err = b.Recv(ctx, buf)
			n = len(buf)
		}
		if err != nil {
			return got, err
		}
		if n == 0 {
			return got, nil
		}
		got++
		if got%64 == 0 {
			every64()
		}
	}
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
