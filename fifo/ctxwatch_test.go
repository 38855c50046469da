package fifo

import (
	"context"
	"errors"
	"testing"
	"time"
)

// A tcp reader's context is watched by one registration kept between
// reads (ctxWatch). These tests attack what keeping it could break: a
// watch that fires while no one reads, or while a reader under another
// context reads, must not end that reader; a reader whose context ended
// must still stop; and waiting for a message must cost no allocation.

// sendAndReceive sends msg from from after d, so that the receiver is blocked
// in the socket by then, and requires to to receive it under ctx; what
// names the receive in a failure. It waits for the send before returning,
// so the test may close from afterwards.
func sendAndReceive(t *testing.T, from, to *Conn, ctx context.Context, d time.Duration, msg, what string) {
	t.Helper()
	sent := make(chan error, 1)
	go func() {
		time.Sleep(d)
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		sent <- from.Send(sctx, []byte(msg))
	}()
	got, err := to.Recv(ctx, nil)
	if serr := <-sent; serr != nil {
		t.Fatalf("send %q: %v", msg, serr)
	}
	if err != nil || string(got) != msg {
		t.Fatalf("%s: %q, %v; want %q", what, got, err, msg)
	}
}

func TestTCPWatchOfAnEndedContextSparesTheNextReader(t *testing.T) {
	a, b := tcpPair(t, Config{})
	defer a.Close()
	defer b.Close()
	first, cancelFirst := context.WithCancel(context.Background())
	sendAndReceive(t, a, b, first, 20*time.Millisecond, "one", "first receive")
	// The first context ends while no one reads: its watch fires and
	// sets the socket's read deadline into the past.
	cancelFirst()
	time.Sleep(10 * time.Millisecond)

	// A reader under another context (no deadline) must wait for its
	// message, not fail on the deadline the first one left.
	second, cancelSecond := context.WithCancel(context.Background())
	defer cancelSecond()
	sendAndReceive(t, a, b, second, 20*time.Millisecond, "two", "second receive")
	// And one under a context with a deadline too.
	third, cancelThird := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancelThird()
	sendAndReceive(t, a, b, third, 20*time.Millisecond, "three", "third receive")
}

func TestTCPWatchFiringDuringAnotherReadSparesIt(t *testing.T) {
	a, b := tcpPair(t, Config{})
	defer a.Close()
	defer b.Close()
	first, cancelFirst := context.WithCancel(context.Background())
	defer cancelFirst()
	sendAndReceive(t, a, b, first, 10*time.Millisecond, "one", "first receive")
	// A reader under a context with a deadline blocks; the first context,
	// whose watch a kept registration would still hold, ends meanwhile.
	second, cancelSecond := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancelSecond()
	go func() {
		time.Sleep(20 * time.Millisecond)
		cancelFirst()
	}()
	sendAndReceive(t, a, b, second, 60*time.Millisecond, "two", "second receive")
}

func TestTCPReaderStopsWhenItsContextEnds(t *testing.T) {
	a, b := tcpPair(t, Config{})
	defer a.Close()
	defer b.Close()
	ctx, cancel := context.WithCancel(context.Background())
	sendAndReceive(t, a, b, ctx, 10*time.Millisecond, "one", "first receive")
	// Blocked in the socket, under the watch kept from the first read.
	go func() {
		time.Sleep(20 * time.Millisecond)
		cancel()
	}()
	start := time.Now()
	if _, err := b.Recv(ctx, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("receive under a cancelled context: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("the cancelled receive took %v", d)
	}
	// Again under the same ended context: at once, with its error.
	if _, err := b.Recv(ctx, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("receive under an ended context: %v", err)
	}
	// The connection still serves a reader under a live context.
	live, cancelLive := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancelLive()
	sendAndReceive(t, a, b, live, 10*time.Millisecond, "two", "receive after the cancelled ones")
}

// valueCtx is a context of a type that == cannot compare: a watch must
// tell such contexts apart without a panic.
type valueCtx struct {
	context.Context
	tags []string
}

func TestTCPWatchAcceptsIncomparableContexts(t *testing.T) {
	a, b := tcpPair(t, Config{})
	defer a.Close()
	defer b.Close()
	parent, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, msg := range []string{"one", "two"} {
		ctx := valueCtx{parent, []string{msg}}
		sendAndReceive(t, a, b, ctx, 10*time.Millisecond, msg, "receive under a context of an incomparable type")
	}
}

// TestTCPWaitingReceiveAllocatesNothing: a receive that waits in the
// socket, under the same context each time as a worker's receiver does,
// into a buffer of its own.
func TestTCPWaitingReceiveAllocatesNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	a, b := tcpPair(t, Config{})
	defer a.Close()
	defer b.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go echoBack(ctx, a, 64) // the peer echoes every message back
	msg, buf := []byte("ping"), make([]byte, 0, 64)
	round := func() {
		if err := b.Send(ctx, msg); err != nil {
			t.Fatal(err)
		}
		got, err := b.Recv(ctx, buf[:0])
		if err != nil || string(got) != "ping" {
			t.Fatalf("echo: %q, %v", got, err)
		}
	}
	for range 100 {
		round()
	}
	if n := testing.AllocsPerRun(200, round); n > 0 {
		t.Fatalf("a round trip allocates %.2f times", n)
	}
}

// TestTCPWatchAcrossAResume: the watch of a reader whose context ends
// after its connection was broken and resumed, so that its deadline goes
// to the new connection, must not end a later reader under another
// context on that connection.
func TestTCPWatchAcrossAResume(t *testing.T) {
	accepted, dialed, relay, _ := relayedPair(t, Config{})
	defer accepted.Close()
	defer dialed.Close()
	first, cancelFirst := context.WithCancel(context.Background())
	defer cancelFirst()
	sendAndReceive(t, accepted, dialed, first, 10*time.Millisecond, "one", "first receive")
	if relay.Reset() == 0 {
		t.Fatal("the relay had no connection to break")
	}
	// The next message travels over the resumed connection.
	sendAndReceive(t, accepted, dialed, first, 10*time.Millisecond, "two", "receive across the resume")
	cancelFirst() // fires on whatever connection the link has now
	time.Sleep(10 * time.Millisecond)
	second, cancelSecond := context.WithCancel(context.Background())
	defer cancelSecond()
	sendAndReceive(t, accepted, dialed, second, 20*time.Millisecond, "three", "receive under another context after the resume")
}

// echoBack sends every message c receives back, into a buffer of bufCap
// reused (so that it allocates nothing), until a receive or send fails.
func echoBack(ctx context.Context, c *Conn, bufCap int) {
	buf := make([]byte, 0, bufCap)
	for {
		p, err := c.Recv(ctx, buf[:0])
		if err != nil || c.Send(ctx, p) != nil {
			return
		}
	}
}
