package fifo

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

// TestIdleReceiverSurvivesLargeSends: a receiver that takes nothing for
// longer than DeadAfter while large messages are sent to it (a process
// paused, or busy elsewhere) must not be taken for dead, and must then
// receive them whole. Over tcp a large payload is pushed into the socket
// at once; with no one reading the peer's socket the sender's write
// stalled, and the kernel's user timeout (DeadAfter) ended the connection.
func TestIdleReceiverSurvivesLargeSends(t *testing.T) {
	for _, name := range []string{"tcp", "tls", "tcp-resumable"} {
		pair := providers[name]
		if pair == nil {
			continue
		}
		t.Run(name, func(t *testing.T) {
			const size = 8 << 20
			a, b := pair(t, Config{MaxMessage: size, BulkSlots: 2, DeadAfter: time.Second})
			defer a.Close()
			defer b.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			sent := make(chan error, 1)
			go func() {
				for i := 0; i < 2; i++ {
					if err := a.Send(ctx, pattern(i, size)); err != nil {
						sent <- err
						return
					}
				}
				sent <- nil
			}()
			time.Sleep(2500 * time.Millisecond) // idle past DeadAfter
			for i := 0; i < 2; i++ {
				got, err := b.Recv(ctx, nil)
				if err != nil {
					t.Fatalf("message %d after the pause: %v (Send: %v)", i, err, <-sent)
				}
				if !bytes.Equal(got, pattern(i, size)) {
					t.Fatalf("message %d: %d bytes, not what was sent", i, len(got))
				}
			}
			if err := <-sent; err != nil {
				t.Fatalf("Send: %v", err)
			}
		})
	}
}

// TestLargeSendHonoursDeadlineWhilePeerIdle: a large Send over tcp to a
// live peer that takes nothing ends at its deadline, and the connection
// carries messages afterwards. Its writer blocked on the peer's full
// socket, where the check of its context between chunks never came.
// (Found in review.)
func TestLargeSendHonoursDeadlineWhilePeerIdle(t *testing.T) {
	a, b := tcpPair(t, Config{MaxMessage: 64 << 20})
	defer b.Close()
	defer a.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- a.Send(ctx, make([]byte, 64<<20)) }()
	select {
	case err := <-done:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("a 64 MiB Send to a peer taking nothing, with a 500 ms deadline: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a large Send with a 500 ms deadline still runs after 5 s: its writer blocks on the peer's full socket")
	}
	ctx2, cancel2 := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel2()
	if err := a.Send(ctx2, []byte("after")); err != nil {
		t.Fatal(err)
	}
	if got, err := b.Recv(ctx2, nil); err != nil || string(got) != "after" {
		t.Fatalf("after the given-up payload: %q, %v", got, err)
	}
}

// TestLargeExchangeDoesNotDeadlock: both ends send two large messages of
// the default maximum, then receive. Neither reads while it sends, so each
// writer waited for the other's reader, for good. (Found in review.)
func TestLargeExchangeDoesNotDeadlock(t *testing.T) {
	a, b := tcpPair(t, Config{})
	defer b.Close()
	defer a.Close()
	run := func(c *Conn, errs chan<- error) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		for i := 0; i < 2; i++ {
			if err := c.Send(ctx, pattern(i, DefaultMaxMessage)); err != nil {
				errs <- err
				return
			}
		}
		for i := 0; i < 2; i++ {
			got, err := c.Recv(ctx, nil)
			if err != nil {
				errs <- err
				return
			}
			if !bytes.Equal(got, pattern(i, DefaultMaxMessage)) {
				errs <- fmt.Errorf("message %d differs", i)
				return
			}
		}
		errs <- nil
	}
	errs := make(chan error, 2)
	go run(a, errs)
	go run(b, errs)
	for i := 0; i < 2; i++ {
		select {
		case err := <-errs:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(15 * time.Second):
			t.Fatal("both ends still in Send after 15 s: each writer blocks on a socket nobody reads")
		}
	}
}
