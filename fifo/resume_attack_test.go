package fifo

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// Attacks on resumption found by an adversarial review: each test failed
// before its fix.

// A dialer with no call in progress (a client between requests) used to
// miss that its connection broke, as nothing read its socket: it never
// dialed again, and its listener's end, waiting in Recv as a server does,
// gave the link up after DeadAfter although the network was back at once.
// A resumable link now watches its socket for a reset.
func TestIdleDialerResumesAfterReset(t *testing.T) {
	const deadAfter = 2 * time.Second
	a, b, r, _ := relayedPair(t, Config{DeadAfter: deadAfter})
	defer a.Close()
	defer b.Close()
	echoCheck(t, a, b)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// A server waits for requests; the client (dialer) is idle.
	got := make(chan error, 1)
	go func() {
		m, err := a.Recv(ctx, nil)
		if err == nil {
			t.Logf("server got %q", m)
		}
		got <- err
	}()
	time.Sleep(50 * time.Millisecond)
	r.Reset() // one reset; the network works again at once
	select {
	case err := <-got:
		t.Fatalf("server end after one reset of an idle client: %v (client resumes %d, server resumes %d)", err, b.Resumes(), a.Resumes())
	case <-time.After(2 * deadAfter):
	}
	// The client sends a request after its idle time.
	if err := b.Send(ctx, []byte("request")); err != nil {
		t.Fatalf("client Send: %v", err)
	}
	if err := <-got; err != nil {
		t.Fatalf("server: %v", err)
	}
}

// Same, with a message in flight: the client's Send returned nil and the
// connection broke before the bytes arrived (a stall, then a reset); the
// message used to be lost, as nothing on the client's side read.
func TestIdleDialerKeepsWhatItSent(t *testing.T) {
	const deadAfter = 2 * time.Second
	a, b, r, _ := relayedPair(t, Config{DeadAfter: deadAfter})
	defer a.Close()
	defer b.Close()
	echoCheck(t, a, b)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	r.Stall(100 * time.Millisecond)
	if err := b.Send(ctx, []byte("sent before the break")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond)
	r.Reset()
	m, err := a.Recv(ctx, nil)
	if err != nil {
		t.Fatalf("a message the client sent is lost; server: %v", err)
	}
	t.Logf("got %q", m)
}

// A Send of a rendezvous whose ctx was already done took a rendezvous slot
// and never gave it back: after BulkSlots such sends, no large message could
// be sent any more.
func TestCancelledRendezvousFreesItsSlot(t *testing.T) {
	cfg := Config{MaxMessage: 4 << 20, BulkSlots: 1, DeadAfter: 5 * time.Second}
	a, b, _, _ := relayedPair(t, cfg)
	defer a.Close()
	defer b.Close()
	dead, cancel := context.WithCancel(context.Background())
	cancel()
	big := bytes.Repeat([]byte{1}, 3*bulkChunk)
	if err := a.Send(dead, big); err == nil {
		t.Fatal("Send with a cancelled ctx succeeded")
	}
	// The receiver is idle and ready; a rendezvous should go through now.
	ctx, c2 := context.WithTimeout(context.Background(), 3*time.Second)
	defer c2()
	go b.Recv(ctx, nil)
	if err := a.Send(ctx, big); err != nil {
		l := a.l.(*tcpLink)
		l.bmu.Lock()
		out := len(l.out)
		l.bmu.Unlock()
		t.Fatalf("a rendezvous after a cancelled one: %v (slots taken %d of %d, out %d)", err, len(l.slots), cfg.BulkSlots, out)
	}
}

// A listener's end that died of a corrupt frame kept its session: its
// dialer's re-dials were accepted and then dropped, so the dialer was dead
// only after DeadAfter instead of fenced at once.
func TestDeadListenerEndFencesItsDialer(t *testing.T) {
	const deadAfter = 3 * time.Second
	a, b, _, l := relayedPair(t, Config{DeadAfter: deadAfter})
	defer a.Close()
	defer b.Close()
	echoCheck(t, a, b)
	// The dialer's peer-facing socket carries a garbage frame: the listener's
	// end refuses it with ErrCorrupt.
	b.l.(*tcpLink).w.Load().nc.Write([]byte{99})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := a.Recv(ctx, nil); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("listener end: %v", err)
	}
	start := time.Now()
	_, err := b.Recv(ctx, nil)
	d := time.Since(start)
	l.smu.Lock()
	held := len(l.sessions)
	l.smu.Unlock()
	t.Logf("dialer: %v after %v; listener still holds %d sessions", err, d, held)
	if d > deadAfter/2 || held != 0 {
		t.Fatalf("dialer fenced after %v (DeadAfter %v), %d sessions still held", d, deadAfter, held)
	}
}

var _ sync.Mutex

// cutProxy forwards connections to upstream. Connection number cutAt (from
// 1) passes the dialer's bytes, passes only the first cutAfter bytes the
// other way and then resets both sides: a reset that falls inside a
// handshake message. kill resets every connection so far.
type cutProxy struct {
	ln       net.Listener
	mu       sync.Mutex
	n        int
	conns    []*net.TCPConn
	cutAt    int
	cutAfter int
}

func newCutProxy(t *testing.T, upstream string, cutAt, cutAfter int) *cutProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{ln: ln, cutAt: cutAt, cutAfter: cutAfter}
	t.Cleanup(func() { ln.Close(); p.kill() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			u, err := net.Dial("tcp", upstream)
			if err != nil {
				c.Close()
				continue
			}
			down, up := c.(*net.TCPConn), u.(*net.TCPConn)
			p.mu.Lock()
			p.n++
			n := p.n
			p.conns = append(p.conns, down, up)
			p.mu.Unlock()
			go io.Copy(up, down)
			if n == p.cutAt {
				go func() {
					io.CopyN(down, up, int64(p.cutAfter))
					time.Sleep(20 * time.Millisecond)
					down.SetLinger(0)
					up.SetLinger(0)
					down.Close()
					up.Close()
				}()
			} else {
				go io.Copy(down, up)
			}
		}
	}()
	return p
}

func (p *cutProxy) kill() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.SetLinger(0)
		c.Close()
	}
	p.conns = nil
}

// A reset that cut the listener's hello of a re-dial in the middle made the
// dialer's end dead at once (taken for an ErrAuth refusal), although the
// next re-dial would have resumed the link well within DeadAfter.
func TestResetInsideRedialIsNotARefusal(t *testing.T) {
	cfg := Config{DeadAfter: 5 * time.Second}
	l := listen(t, cfg)
	defer l.Close()
	// Connection 2 is the first re-dial: 40 of the listener's 128 bytes pass.
	p := newCutProxy(t, l.Addr().String(), 2, 40)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	a, b := acceptDial(t, l, p.ln.Addr().String(), cfg)
	defer a.Close()
	defer b.Close()
	echoCheck(t, a, b)
	p.kill() // the first connection breaks
	got := make(chan error, 1)
	go func() {
		m, err := a.Recv(ctx, nil)
		if err == nil && string(m) != "after" {
			err = errors.New("wrong message")
		}
		got <- err
	}()
	if err := b.Send(ctx, []byte("after")); err != nil {
		t.Fatalf("send: %v", err)
	}
	if err := <-got; err != nil {
		t.Fatalf("listener end: %v\ndialer end: %v (ErrAuth: %v)", err, b.l.failed(), errors.Is(b.l.failed(), ErrAuth))
	}
}

// A resume state that claims more cells consumed than received switched
// the sender's flow control off for good; it is refused as corrupt.
func TestResumeStateConsumedPastReceivedRefused(t *testing.T) {
	l := resumeSender(t, []byte("hi"))
	l.wmu.Lock()
	peer := resumeState{nextPos: l.txEnd, nextSeq: 2, consumed: 1 << 62}
	_, err := l.regenerate(peer)
	l.wmu.Unlock()
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("consumed %d beyond next position %d: %v, want ErrCorrupt", peer.consumed, peer.nextPos, err)
	}
}

// A payload given up after some of its chunks had left (its Send's context
// ended) whose abort frame was lost with the connection stayed half held
// at the peer: counted against BulkSlots there, it made the next large
// message a protocol violation. The resume drops what the peer reports
// holding of payloads this end no longer has out.
func TestResumeDropsAbandonedPayload(t *testing.T) {
	cfg := Config{MaxMessage: 4 << 20, BulkSlots: 1, DeadAfter: 10 * time.Second}
	a, b, r, _ := relayedPair(t, cfg)
	defer a.Close()
	defer b.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// The state an abort lost in the break leaves: part of a payload held,
	// its sender no longer has it out.
	lb := b.l.(*tcpLink)
	const abandoned = 1 << 30
	lb.bmu.Lock()
	lb.assembly[abandoned] = make([]byte, bulkChunk, 2*bulkChunk)
	lb.bmu.Unlock()
	r.Reset()
	big := tagged(0, 1, 3*bulkChunk)
	errc := make(chan error, 1)
	go func() { errc <- a.Send(ctx, big) }()
	got, err := b.Recv(ctx, nil)
	if err != nil {
		t.Fatalf("a large message after the resume: %v (Send: %v)", err, <-errc)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, big) {
		t.Fatalf("%d bytes, not what was sent", len(got))
	}
	if b.Resumes() == 0 {
		t.Fatal("no resume: the test proves nothing")
	}
	lb.bmu.Lock()
	_, held := lb.assembly[abandoned]
	lb.bmu.Unlock()
	if held {
		t.Fatal("the abandoned payload is still held after the resume")
	}
}
