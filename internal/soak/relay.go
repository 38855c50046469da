package soak

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"time"
)

// relay forwards one tcp link of a group (the later member dials it, it
// dials the earlier member's listener), so the parent can break that link
// mid-traffic: reset closes every connection through it with an RST on
// both sides. It keeps listening, so a member that reconnects to the same
// address gets through again.
type relay struct {
	ln       net.Listener
	upstream string // the accepting member's own listener

	mu    sync.Mutex
	pairs map[*relayPair]struct{}
	done  bool
	wg    sync.WaitGroup
	// ctx ends at close: a dial to a member that never listens stops then.
	ctx    context.Context
	cancel context.CancelFunc
}

type relayPair struct{ down, up *net.TCPConn }

// relayDialWait bounds how long a relay retries the upstream member's
// listener: members start in any order, and a dialer whose connection the
// relay drops just dials again; past this the member is not coming.
const relayDialWait = 10 * time.Second

// relayDialBackoff caps the pause between upstream dials.
const relayDialBackoff = 50 * time.Millisecond

func newRelay(upstream string) (*relay, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &relay{ln: ln, upstream: upstream, pairs: map[*relayPair]struct{}{}, ctx: ctx, cancel: cancel}
	r.wg.Add(1)
	go r.accept()
	return r, nil
}

func (r *relay) addr() string { return r.ln.Addr().String() }

func (r *relay) accept() {
	defer r.wg.Done()
	for {
		c, err := r.ln.Accept()
		if err != nil {
			return // closed
		}
		r.mu.Lock()
		if r.done {
			r.mu.Unlock()
			c.Close()
			return
		}
		r.wg.Add(1)
		r.mu.Unlock()
		go r.serve(c.(*net.TCPConn))
	}
}

// serve connects one accepted connection upstream and copies both ways
// until either side ends; then it closes both, as a broken cable would.
func (r *relay) serve(down *net.TCPConn) {
	defer r.wg.Done()
	ctx, cancel := context.WithTimeout(r.ctx, relayDialWait)
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
		wait = min(2*wait, relayDialBackoff)
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
		_, err := io.Copy(dst, src)
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

// reset breaks every connection through the relay with an RST to both
// members, and reports how many it broke.
func (r *relay) reset() int {
	r.mu.Lock()
	defer r.mu.Unlock()
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

// active reports how many connections pass through the relay now.
func (r *relay) active() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.pairs)
}

// close stops the relay and every connection through it, and waits for
// its goroutines.
func (r *relay) close() {
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
