package fifo

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

// Cork holds back an end's tcp writes. These tests attack the promise that
// nothing held back is lost or held for good: an Uncork, a reader about
// to wait for the peer, and a Close each let it out.

// silentFor reports whether nothing reaches c within d.
func silentFor(t *testing.T, c *Conn, d time.Duration) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	got, err := c.Recv(ctx, nil)
	if err == nil {
		t.Logf("received %q", got)
		return false
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("receive: %v", err)
	}
	return true
}

func TestCorkHoldsWritesUntilTheLastUncork(t *testing.T) {
	a, b := tcpPair(t, Config{})
	defer a.Close()
	defer b.Close()
	if !a.Corks() {
		t.Fatal("a tcp end does not cork")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	a.Cork()
	a.Cork() // nested
	for i := range 3 {
		if err := a.Send(ctx, fmt.Appendf(nil, "m%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if !silentFor(t, b, 50*time.Millisecond) {
		t.Fatal("a message left while corked")
	}
	if err := a.Uncork(); err != nil {
		t.Fatal(err)
	}
	if !silentFor(t, b, 50*time.Millisecond) {
		t.Fatal("a message left while one cork was still held")
	}
	if err := a.Uncork(); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		got, err := b.Recv(ctx, nil)
		if want := fmt.Sprintf("m%d", i); err != nil || string(got) != want {
			t.Fatalf("after the last uncork: %q, %v; want %q", got, err, want)
		}
	}
}

// TestCorkedEndThatWaitsLetsItsWritesOut: an end that corks, sends a
// request and waits for the answer must not wait for good: the request
// leaves once its reader is about to wait.
func TestCorkedEndThatWaitsLetsItsWritesOut(t *testing.T) {
	a, b := tcpPair(t, Config{})
	defer a.Close()
	defer b.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	go func() { // b answers each request
		for {
			p, err := b.Recv(ctx, nil)
			if err != nil || b.Send(ctx, append([]byte("re:"), p...)) != nil {
				return
			}
		}
	}()
	a.Cork()
	defer a.Uncork()
	for i := range 3 {
		if err := a.Send(ctx, fmt.Appendf(nil, "q%d", i)); err != nil {
			t.Fatal(err)
		}
		got, err := a.Recv(ctx, nil)
		if want := fmt.Sprintf("re:q%d", i); err != nil || string(got) != want {
			t.Fatalf("answer while corked: %q, %v; want %q", got, err, want)
		}
	}
}

// TestCorkedCreditsReachThePeer: a corked end that receives more than a
// ring's worth owes the peer credits; the sender, out of credits, must
// still get them, so the stream goes on.
func TestCorkedCreditsReachThePeer(t *testing.T) {
	cfg := Config{Cells: 16}
	a, b := tcpPair(t, cfg)
	defer a.Close()
	defer b.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	const n = 200 // many times the ring's 16 cells
	sent := make(chan error, 1)
	go func() {
		for i := range n {
			if err := a.Send(ctx, fmt.Appendf(nil, "%d", i)); err != nil {
				sent <- err
				return
			}
		}
		sent <- nil
	}()
	b.Cork()
	defer b.Uncork()
	for i := range n {
		got, err := b.Recv(ctx, nil)
		if want := fmt.Sprint(i); err != nil || string(got) != want {
			t.Fatalf("message %d while corked: %q, %v", i, got, err)
		}
	}
	if err := <-sent; err != nil {
		t.Fatal(err)
	}
}

// TestCorkedSenderThatWaitsLetsItsWritesOut: a goroutine that corks and
// then sends more than the ring holds, or more large messages than there
// are rendezvous slots, must wait for the peer's credits or finishes,
// while another goroutine of its end sits in a blocking read. What the
// cork holds is what the peer needs to answer: it must leave before the
// sender waits, or the link hangs for good (a worker's drainer did, in
// review, with eight 40 KiB calls queued at once).
func TestCorkedSenderThatWaitsLetsItsWritesOut(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		n    int
		size int
	}{
		{"credits", Config{Cells: 16}, 20, 100},
		{"rendezvous", Config{}, 4, 64 << 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := tcpPair(t, tc.cfg)
			defer a.Close()
			defer b.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			got := make(chan error, 1)
			go func() { // b takes everything
				for i := range tc.n {
					p, err := b.Recv(ctx, nil)
					if err == nil && len(p) != tc.size {
						err = fmt.Errorf("message %d: %d bytes, want %d", i, len(p), tc.size)
					}
					if err != nil {
						got <- err
						return
					}
				}
				got <- nil
			}()
			reading := make(chan struct{})
			go func() { // a's own reader, blocked in its socket read
				close(reading)
				a.Recv(ctx, nil)
			}()
			<-reading
			time.Sleep(10 * time.Millisecond) // the reader is in its read
			a.Cork()
			for i := range tc.n {
				if err := a.Send(ctx, make([]byte, tc.size)); err != nil {
					t.Fatalf("corked send %d: %v", i, err)
				}
			}
			if err := a.Uncork(); err != nil {
				t.Fatal(err)
			}
			if err := <-got; err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestCloseLetsCorkedWritesOut(t *testing.T) {
	a, b := tcpPair(t, Config{})
	defer b.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	a.Cork()
	if err := a.Send(ctx, []byte("last words")); err != nil {
		t.Fatal(err)
	}
	a.Close()
	if got, err := b.Recv(ctx, nil); err != nil || string(got) != "last words" {
		t.Fatalf("a corked message sent before Close: %q, %v", got, err)
	}
	if _, err := b.Recv(ctx, nil); !errors.Is(err, ErrClosed) && !errors.Is(err, ErrPeerDead) {
		t.Fatalf("after the peer's close: %v", err)
	}
}

func TestPendingSeesWhatArrived(t *testing.T) {
	for name, pair := range map[string]func(testing.TB, Config) (*Conn, *Conn){"tcp": tcpPair, "mem": memPair, "shm": shmPair} {
		t.Run(name, func(t *testing.T) {
			a, b := pair(t, Config{})
			defer a.Close()
			defer b.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if b.Pending() {
				t.Fatal("pending before anything was sent")
			}
			a.Cork() // the burst travels together (tcp)
			for _, m := range []string{"one", "two", "three"} {
				if err := a.Send(ctx, []byte(m)); err != nil {
					t.Fatal(err)
				}
			}
			if err := a.Uncork(); err != nil {
				t.Fatal(err)
			}
			if got, err := b.Recv(ctx, nil); err != nil || string(got) != "one" {
				t.Fatalf("receive: %q, %v", got, err)
			}
			for _, m := range []string{"two", "three"} {
				if !b.Pending() {
					t.Fatalf("%q, which came with the first, is not pending", m)
				}
				if got, err := b.Recv(ctx, nil); err != nil || string(got) != m {
					t.Fatalf("receive: %q, %v", got, err)
				}
			}
			if b.Pending() {
				t.Fatal("pending after everything was received")
			}
		})
	}
}
