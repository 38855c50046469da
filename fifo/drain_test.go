package fifo

// Tests of the tcp end's idle drain (idleDrains), most found in review.

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"
)

// TestIdleDrainKeepsCork: Cork promises to hold writes back until Uncork,
// or until a receiver of this end is about to wait for the peer. A corked
// end that receives something while no call of its own reads must not
// have its held-back writes flushed by the idle drain.
func TestIdleDrainKeepsCork(t *testing.T) {
	a, b := tcpPair(t, Config{})
	defer a.Close()
	defer b.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	a.Cork()
	if err := a.Send(ctx, []byte("held")); err != nil {
		t.Fatal(err)
	}
	// b sends to a: bytes wait in a's socket, and no call of a reads.
	if err := b.Send(ctx, []byte("ping")); err != nil {
		t.Fatal(err)
	}
	if !silentFor(t, b, 300*time.Millisecond) {
		t.Fatal("a corked message left before Uncork: a's idle drain flushed it")
	}
	if err := a.Uncork(); err != nil {
		t.Fatal(err)
	}
	if got, err := b.Recv(ctx, nil); err != nil || string(got) != "held" {
		t.Fatalf("after Uncork: %q, %v", got, err)
	}
}

func TestStaleWatchDeadlineBackgroundRecv(t *testing.T) {
	a, b := tcpPair(t, Config{})
	defer a.Close()
	defer b.Close()
	ctx1, cancel1 := context.WithCancel(context.Background())
	go func() { time.Sleep(30 * time.Millisecond); b.Send(context.Background(), []byte("one")) }()
	if got, err := a.Recv(ctx1, nil); err != nil || string(got) != "one" {
		t.Fatal(got, err)
	}
	cancel1() // the kept watch fires: a past read deadline on the idle socket
	time.Sleep(20 * time.Millisecond)
	go func() { time.Sleep(100 * time.Millisecond); b.Send(context.Background(), []byte("two")) }()
	got, err := a.Recv(context.Background(), nil)
	if err != nil || string(got) != "two" {
		t.Fatalf("Recv(Background) after an earlier context ended: %q, %v", got, err)
	}
}

func TestDrainReadsPeerClose(t *testing.T) {
	for _, name := range []string{"tcp", "tls", "tcp-resumable"} {
		t.Run(name, func(t *testing.T) {
			a, b := namedPair(t, name)(t, Config{MaxMessage: 4 << 20, BulkSlots: 4})
			defer b.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			for i := 0; i < 3; i++ {
				if err := a.Send(ctx, pattern(i, 100<<10+i)); err != nil {
					t.Fatal(err)
				}
			}
			a.Send(ctx, []byte("last"))
			a.Close()
			time.Sleep(300 * time.Millisecond) // b's drains read it all, and the close
			for i := 0; i < 3; i++ {
				got, err := b.Recv(ctx, nil)
				if err != nil || len(got) != 100<<10+i {
					t.Fatalf("%d: %d %v", i, len(got), err)
				}
			}
			if got, err := b.Recv(ctx, nil); err != nil || string(got) != "last" {
				t.Fatalf("last: %q %v", got, err)
			}
			_, err := b.Recv(ctx, nil)
			err2 := b.Send(ctx, []byte("x"))
			fmt.Println(name, "after:", err, "| send:", err2)
			if err == nil || err2 == nil {
				t.Fatal("no close reported")
			}
		})
	}
}

// Many mid-sized messages over tls while the receiver idles in spells, so
// that drains cut records at their 1 ms deadline.
func TestDrainCutsTLSRecords(t *testing.T) {
	for _, name := range []string{"tls", "tcp"} {
		t.Run(name, func(t *testing.T) {
			cfg := Config{MaxMessage: 1 << 20, SocketSpin: 20 * time.Microsecond}
			a, b := namedPair(t, name)(t, cfg)
			defer a.Close()
			defer b.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			const n = 200
			size := func(i int) int { return 1 + (i*7919)%(300<<10) }
			sent := make(chan error, 1)
			go func() {
				for i := 0; i < n; i++ {
					if err := a.Send(ctx, pattern(i, size(i))); err != nil {
						sent <- err
						return
					}
				}
				sent <- nil
			}()
			for i := 0; i < n; i++ {
				if i%20 == 0 {
					time.Sleep(120 * time.Millisecond)
				}
				got, err := b.Recv(ctx, nil)
				if err != nil {
					t.Fatalf("%d: %v", i, err)
				}
				if !bytes.Equal(got, pattern(i, size(i))) {
					t.Fatalf("%d differs", i)
				}
			}
			if err := <-sent; err != nil {
				t.Fatal(err)
			}
		})
	}
}

// Close races the drain: an idle end whose socket fills is closed at
// varying points of its drains.
func TestCloseRacesDrain(t *testing.T) {
	for _, name := range []string{"tcp", "tls", "tcp-resumable"} {
		t.Run(name, func(t *testing.T) {
			for i := 0; i < 8; i++ {
				a, b := namedPair(t, name)(t, Config{MaxMessage: 8 << 20})
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				sent := make(chan error, 1)
				go func() { sent <- a.Send(ctx, make([]byte, 8<<20)) }()
				time.Sleep(time.Duration(45+i*3) * time.Millisecond)
				start := time.Now()
				closed := make(chan struct{})
				go func() { b.Close(); close(closed) }()
				select {
				case <-closed:
				case <-time.After(3 * time.Second):
					t.Fatal("Close hangs")
				}
				if d := time.Since(start); d > 500*time.Millisecond {
					t.Errorf("Close took %v", d)
				}
				select {
				case <-sent:
				case <-time.After(5 * time.Second):
					t.Fatal("Send hangs after peer closed")
				}
				a.Close()
				cancel()
			}
		})
	}
}

// namedPair is the provider called name, skipping the test where the run
// holds other providers only (RREF_FABRIC_ONLY).
func namedPair(t *testing.T, name string) pairFunc {
	t.Helper()
	pair := providers[name]
	if pair == nil {
		t.Skipf("provider %s is not in this run", name)
	}
	return pair
}
