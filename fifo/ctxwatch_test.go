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

// sendAfter sends msg on from after d, so that the receiver is blocked
// in the socket by then; the test waits for the send before it closes from.
func sendAfter(t *testing.T, from *Conn, d time.Duration, msg string) (wait func()) {
	sent := make(chan error, 1)
	go func() {
		time.Sleep(d)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		sent <- from.Send(ctx, []byte(msg))
	}()
	return func() {
		t.Helper()
		if err := <-sent; err != nil {
			t.Errorf("send %q: %v", msg, err)
		}
	}
}

func TestTCPWatchOfAnEndedContextSparesTheNextReader(t *testing.T) {
	a, b := tcpPair(t, Config{})
	defer a.Close()
	defer b.Close()
	first, cancelFirst := context.WithCancel(context.Background())
	wait := sendAfter(t, a, 20*time.Millisecond, "one")
	if got, err := b.Recv(first, nil); err != nil || string(got) != "one" {
		t.Fatalf("first receive: %q, %v", got, err)
	}
	wait()
	// The first context ends while no one reads: its watch fires and
	// sets the socket's read deadline into the past.
	cancelFirst()
	time.Sleep(10 * time.Millisecond)

	// A reader under another context (no deadline) must wait for its
	// message, not fail on the deadline the first one left.
	second, cancelSecond := context.WithCancel(context.Background())
	defer cancelSecond()
	wait = sendAfter(t, a, 20*time.Millisecond, "two")
	if got, err := b.Recv(second, nil); err != nil || string(got) != "two" {
		t.Fatalf("second receive: %q, %v", got, err)
	}
	wait()
	// And one under a context with a deadline too.
	third, cancelThird := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancelThird()
	wait = sendAfter(t, a, 20*time.Millisecond, "three")
	if got, err := b.Recv(third, nil); err != nil || string(got) != "three" {
		t.Fatalf("third receive: %q, %v", got, err)
	}
	wait()
}

func TestTCPWatchFiringDuringAnotherReadSparesIt(t *testing.T) {
	a, b := tcpPair(t, Config{})
	defer a.Close()
	defer b.Close()
	first, cancelFirst := context.WithCancel(context.Background())
	defer cancelFirst()
	wait := sendAfter(t, a, 10*time.Millisecond, "one")
	if got, err := b.Recv(first, nil); err != nil || string(got) != "one" {
		t.Fatalf("first receive: %q, %v", got, err)
	}
	wait()
	// A reader under a context with a deadline blocks; the first context,
	// whose watch a kept registration would still hold, ends meanwhile.
	second, cancelSecond := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancelSecond()
	go func() {
		time.Sleep(20 * time.Millisecond)
		cancelFirst()
	}()
	wait = sendAfter(t, a, 60*time.Millisecond, "two")
	if got, err := b.Recv(second, nil); err != nil || string(got) != "two" {
		t.Fatalf("second receive: %q, %v (the first context's end reached it)", got, err)
	}
	wait()
}

func TestTCPReaderStopsWhenItsContextEnds(t *testing.T) {
	a, b := tcpPair(t, Config{})
	defer a.Close()
	defer b.Close()
	ctx, cancel := context.WithCancel(context.Background())
	wait := sendAfter(t, a, 10*time.Millisecond, "one")
	if got, err := b.Recv(ctx, nil); err != nil || string(got) != "one" {
		t.Fatalf("first receive: %q, %v", got, err)
	}
	wait()
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
	wait = sendAfter(t, a, 10*time.Millisecond, "two")
	if got, err := b.Recv(live, nil); err != nil || string(got) != "two" {
		t.Fatalf("receive after the cancelled ones: %q, %v", got, err)
	}
	wait()
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
	for i, msg := range []string{"one", "two"} {
		ctx := valueCtx{parent, []string{msg}}
		wait := sendAfter(t, a, 10*time.Millisecond, msg)
		if got, err := b.Recv(ctx, nil); err != nil || string(got) != msg {
			t.Fatalf("receive %d: %q, %v", i, got, err)
		}
		wait()
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
	// The peer echoes every message back.
	go func() {
		buf := make([]byte, 0, 64)
		for {
			p, err := a.Recv(ctx, buf[:0])
			if err != nil {
				return
			}
			if a.Send(ctx, p) != nil {
				return
			}
		}
	}()
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
	wait := sendAfter(t, accepted, 10*time.Millisecond, "one")
	if got, err := dialed.Recv(first, nil); err != nil || string(got) != "one" {
		t.Fatalf("first receive: %q, %v", got, err)
	}
	wait()
	if relay.Reset() == 0 {
		t.Fatal("the relay had no connection to break")
	}
	// The next message travels over the resumed connection.
	wait = sendAfter(t, accepted, 10*time.Millisecond, "two")
	if got, err := dialed.Recv(first, nil); err != nil || string(got) != "two" {
		t.Fatalf("receive across the resume: %q, %v", got, err)
	}
	wait()
	cancelFirst() // fires on whatever connection the link has now
	time.Sleep(10 * time.Millisecond)
	second, cancelSecond := context.WithCancel(context.Background())
	defer cancelSecond()
	wait = sendAfter(t, accepted, 20*time.Millisecond, "three")
	if got, err := dialed.Recv(second, nil); err != nil || string(got) != "three" {
		t.Fatalf("receive under another context after the resume: %q, %v", got, err)
	}
	wait()
}
