package fifo

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestCloseWhileAnotherGoroutineWrites: an end closed while another of
// its goroutines is the link's writer must still tell the peer it closed,
// after everything it sent. Close used to queue its close frame for that
// writer and shut the socket under it; and a socket shut with the peer's
// credits unread sends a reset, which failed the peer's next write before
// it had read the close frame. The peer then saw a break, not a close: a
// resumable one waited DeadAfter (10 s by default) for a re-dial that never
// came, and a worker's Shutdown timed out so in CI. The peer must learn of
// the close at once, every round, and receive every message whose Send
// returned nil: before, up to a third of them were lost.
func TestCloseWhileAnotherGoroutineWrites(t *testing.T) {
	tcpOnly(t)
	const rounds = 30
	for _, tc := range []struct {
		name string
		pair func(testing.TB, Config) (*Conn, *Conn)
		// pause makes the receiver stop now and then, so that the closing
		// end's kernel still holds unsent frames when Close comes.
		pause bool
	}{
		{"resumable", tcpResumablePair, false},
		{"resumable/slow reader", tcpResumablePair, true},
		{"plain", tcpPair, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for round := range rounds {
				a, b := tc.pair(t, Config{DeadAfter: time.Minute})
				if round%2 == 1 {
					a, b = b, a // the other end closes: accepted and dialed ends differ on a break
				}
				closeWhileWriting(t, round, a, b, tc.pause)
			}
		})
	}
}

func closeWhileWriting(t *testing.T, round int, a, b *Conn, pause bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	defer b.Close()
	var sent atomic.Int64
	writing, stopped := make(chan struct{}), make(chan struct{})
	go func() { // keeps a's writer busy until a is closed
		defer close(stopped)
		msg := make([]byte, 200)
		for i := 0; ; i++ {
			if i == 100 {
				close(writing)
			}
			if a.Send(ctx, msg) != nil {
				return
			}
			sent.Add(1)
		}
	}()
	type end struct {
		got int64
		err error
	}
	ended := make(chan end, 1)
	go func() { // b takes everything, so a seldom waits for credits
		var got int64
		for {
			if pause && got%97 == 0 {
				time.Sleep(5 * time.Millisecond)
			}
			if _, err := b.Recv(ctx, nil); err != nil {
				ended <- end{got, err}
				return
			}
			got++
		}
	}()
	<-writing
	a.Close()
	<-stopped
	select {
	case e := <-ended:
		if !errors.Is(e.err, ErrClosed) {
			t.Errorf("round %d: the peer learnt %v; want ErrClosed", round, e.err)
		}
		// The Send that Close cut short may have left or not: its error
		// cannot say, and the close was this end's own.
		if n := sent.Load(); e.got != n && e.got != n+1 {
			t.Errorf("round %d: %d sends returned nil, the peer received %d", round, n, e.got)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("round %d: 5 s after the close the peer still waits", round)
	}
}

// TestCloseDuringResume closes an end just as its connection breaks, so
// that Close meets a resume at its stages (going down, dialing, the state
// exchange, the flush of what the peer lacks), and in half the rounds the
// break comes while Close waits for its close frame to leave toward a peer
// that does not read. Close must return at once every round, and the peer
// must end within its DeadAfter rather than hang. Close waits (closeWait)
// for a resume under way and says it closed over the new connection, and
// tries once more when a break meets its close frame: here the peer
// learns of the close in about three rounds of four, against none before.
// The rest end in ErrPeerDead: a close frame that reached only the relay
// is lost with it, and nothing acknowledges a close. A resume that waits
// for the writer role while Close keeps it for good must be woken to give
// up: without that wake-up Close hung here in one run of three.
func TestCloseDuringResume(t *testing.T) {
	tcpOnly(t)
	const rounds = 24
	// A dialed end that closes while down cannot tell its peer, which then
	// waits DeadAfter for a re-dial: kept short, so the test is too.
	cfg := Config{DeadAfter: 300 * time.Millisecond}
	for round := range rounds {
		a, b, r, _ := relayedPair(t, cfg)
		if round%2 == 1 {
			a, b = b, a
		}
		breakFirst := round%4 < 2
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		stopped := make(chan struct{})
		go func() { // keeps a writing, so the break meets a writer too
			defer close(stopped)
			for a.Send(ctx, make([]byte, 100)) == nil {
			}
		}()
		reading := make(chan struct{})
		ended := make(chan error, 1)
		go func() {
			if !breakFirst {
				<-reading // until then a's socket fills, and its Close waits
			}
			for {
				if _, err := b.Recv(ctx, nil); err != nil {
					ended <- err
					return
				}
			}
		}()
		time.Sleep(time.Duration(1+round%5) * time.Millisecond)
		if breakFirst {
			r.Reset()
			time.Sleep(time.Duration(round%3) * 300 * time.Microsecond)
		}
		closed := make(chan struct{})
		go func() {
			a.Close()
			close(closed)
		}()
		if !breakFirst {
			time.Sleep(time.Duration(1+round%3) * time.Millisecond)
			r.Reset()
		}
		select {
		case <-closed:
		case <-time.After(3 * time.Second):
			buf := make([]byte, 1<<20)
			t.Log(string(buf[:runtime.Stack(buf, true)]))
			cancel()
			t.Fatalf("round %d (break first: %v): Close did not return 3 s after a break", round, breakFirst)
		}
		close(reading)
		<-stopped
		select {
		case err := <-ended:
			if !errors.Is(err, ErrClosed) && !errors.Is(err, ErrPeerDead) {
				t.Errorf("round %d: the peer ended with %v", round, err)
			}
		case <-time.After(2*cfg.DeadAfter + time.Second):
			t.Errorf("round %d: the peer still waits %v after the close", round, 2*cfg.DeadAfter+time.Second)
		}
		b.Close()
		cancel()
	}
}

// TestBothEndsCloseAtOnce: two resumable ends closed at the same moment
// each reset the other's connection, and each must take the reset for the
// peer's close (its close frame is in the socket), not for a break: a
// break would re-dial a listener that no longer holds the session. A TLS
// test caught a first version that did so. Every round both Closes return
// at once and the listener refuses nothing.
func TestBothEndsCloseAtOnce(t *testing.T) {
	tcpOnly(t)
	const rounds = 50
	for _, name := range []string{"plain", "tls"} {
		t.Run(name, func(t *testing.T) {
			var l *TCPListener
			var dialOpts []TCPOption
			if name == "tls" {
				p := groupTLS(t)
				l = listen(t, Config{}, WithTLS(p.server))
				dialOpts = []TCPOption{WithTLS(p.client)}
			} else {
				l = listen(t, Config{})
			}
			defer l.Close()
			for round := range rounds {
				a, b := acceptDial(t, l, l.Addr().String(), Config{}, dialOpts...)
				echoCheck(t, a, b)
				var wg sync.WaitGroup
				start := time.Now()
				for _, c := range []*Conn{a, b} {
					wg.Add(1)
					go func() {
						defer wg.Done()
						c.Close()
					}()
				}
				wg.Wait()
				if took := time.Since(start); took > time.Second {
					t.Errorf("round %d: closing both ends took %v", round, took)
				}
			}
			time.Sleep(2 * watchEvery) // a re-dial, if any, reaches the listener
			if n := l.Refused(); n != 0 {
				t.Errorf("the listener refused %d connections: an end took a close for a break", n)
			}
		})
	}
}
