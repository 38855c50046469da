// Package netfault breaks tcp connections on purpose, for tests and the
// soak: a Relay forwards connections to an upstream address and can reset
// every connection through it, stall them (a partition: nothing passes,
// nothing closes), or refuse new ones, as a network that breaks would. It
// does in user space what tc netem does in a kernel that has it (this
// project's machines do not).
package netfault

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"time"
)

// A Relay listens on a loopback port and forwards each connection it
// accepts to its upstream address. Reset closes every connection through
// it with an RST on both sides; it keeps listening, so a peer that dials
// again gets through (unless SetRefuse is on).
type Relay struct {
	ln       net.Listener
	upstream string

	mu     sync.Mutex
	pairs  map[*relayPair]struct{}
	refuse bool
	done   bool
	resets int // calls of Reset
	// open is closed while bytes may pass; a stall replaces it with an
	// open one until the stall ends (stallEnd).
	open     chan struct{}
	stallEnd time.Time
	stalls   int
	wg       sync.WaitGroup
	// ctx ends at Close: a dial to an upstream that never listens stops then.
	ctx    context.Context
	cancel context.CancelFunc
}

type relayPair struct{ down, up *net.TCPConn }

// upstreamWait bounds how long a relay retries the upstream listener: peers
// start in any order, and a dialer whose connection the relay drops dials
// again; past this the upstream is not coming.
const upstreamWait = 10 * time.Second

// upstreamBackoff caps the pause between upstream dials.
const upstreamBackoff = 50 * time.Millisecond

// NewRelay starts a relay on 127.0.0.1 forwarding to upstream.
func NewRelay(upstream string) (*Relay, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &Relay{ln: ln, upstream: upstream, pairs: map[*relayPair]struct{}{}, ctx: ctx, cancel: cancel, open: make(chan struct{})}
	close(r.open)
	r.wg.Add(1)
	go r.accept()
	return r, nil
}

// Addr is the address to dial instead of the upstream's.
func (r *Relay) Addr() string { return r.ln.Addr().String() }

func (r *Relay) accept() {
	defer r.wg.Done()
	for {
		c, err := r.ln.Accept()
		if err != nil {
			return // closed
		}
		tc := c.(*net.TCPConn)
		r.mu.Lock()
		if r.done || r.refuse {
			r.mu.Unlock()
			tc.SetLinger(0)
			tc.Close()
			continue
		}
		r.wg.Add(1)
		r.mu.Unlock()
		go r.serve(tc)
	}
}

// serve connects one accepted connection upstream and copies both ways
// until either side ends; then it closes both, as a broken cable would.
func (r *Relay) serve(down *net.TCPConn) {
	defer r.wg.Done()
	ctx, cancel := context.WithTimeout(r.ctx, upstreamWait)
	defer cancel()
	var up *net.TCPConn
	var d net.Dialer
	wait := time.Millisecond
	for {
		c, err := d.DialContext(ctx, "tcp", r.upstream)
		if err == nil {
			up = c.(*net.TCPConn)
			break
		}
		select {
		case <-ctx.Done():
			down.Close()
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, upstreamBackoff)
	}
	p := &relayPair{down: down, up: up}
	r.mu.Lock()
	if r.done {
		r.mu.Unlock()
		down.Close()
		up.Close()
		return
	}
	r.pairs[p] = struct{}{}
	r.mu.Unlock()
	var copies sync.WaitGroup
	copies.Add(2)
	pipe := func(dst, src *net.TCPConn) {
		defer copies.Done()
		err := r.copy(dst, src)
		var ne *net.OpError
		if errors.As(err, &ne) {
			// src was reset (or the relay reset it): pass the reset on.
			dst.SetLinger(0)
		}
		dst.Close()
		src.Close()
	}
	go pipe(up, down)
	go pipe(down, up)
	copies.Wait()
	r.mu.Lock()
	delete(r.pairs, p)
	r.mu.Unlock()
}

// relayBuffer is how much a relay reads at once: what a stall holds per
// direction beyond the kernel's socket buffers.
const relayBuffer = 64 << 10

// copy forwards src to dst until src ends, holding each read while the
// relay is stalled. It returns src's error (nil at its end) or dst's.
func (r *Relay) copy(dst, src *net.TCPConn) error {
	buf := make([]byte, relayBuffer)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			r.mu.Lock()
			open := r.open
			r.mu.Unlock()
			select {
			case <-open:
			case <-r.ctx.Done():
				return net.ErrClosed
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return werr
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// Stall stops every byte through the relay, both ways and on connections
// made meanwhile, for d from now (a stall already longer is kept): a
// partition, or a peer that stopped reading, as its ends see it. Nothing
// is closed or lost; what waited passes when the stall ends.
func (r *Relay) Stall(d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stalls++
	end := time.Now().Add(d)
	if end.Before(r.stallEnd) {
		return
	}
	r.stallEnd = end
	select {
	case <-r.open: // not stalled: a new gate, closed
		r.open = make(chan struct{})
	default:
	}
	gate := r.open
	time.AfterFunc(d, func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.open == gate && !time.Now().Before(r.stallEnd) {
			close(gate)
		}
	})
}

// Stalls reports how many times Stall was called.
func (r *Relay) Stalls() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stalls
}

// Reset breaks every connection through the relay with an RST to both
// sides, and reports how many it broke.
func (r *Relay) Reset() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.resets++
	n := 0
	for p := range r.pairs {
		p.down.SetLinger(0) // close sends RST, not FIN
		p.up.SetLinger(0)
		p.down.Close()
		p.up.Close()
		delete(r.pairs, p)
		n++
	}
	return n
}

// SetRefuse makes the relay reset new connections at once (on), as an
// unreachable peer would, or forward them again (off).
func (r *Relay) SetRefuse(on bool) {
	r.mu.Lock()
	r.refuse = on
	r.mu.Unlock()
}

// Resets reports how many times Reset was called.
func (r *Relay) Resets() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.resets
}

// Active reports how many connections pass through the relay now.
func (r *Relay) Active() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.pairs)
}

// Close stops the relay and every connection through it, and waits for
// its goroutines.
func (r *Relay) Close() {
	r.mu.Lock()
	r.done = true
	for p := range r.pairs {
		p.down.Close()
		p.up.Close()
	}
	r.mu.Unlock()
	r.cancel()
	r.ln.Close()
	r.wg.Wait()
}
