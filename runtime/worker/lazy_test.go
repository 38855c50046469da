package worker

import (
	"context"
	"errors"
	"testing"
	"time"
)

// delayFor sets one of the package's delays (deleteDelay, ackDelay) to d
// for the rest of the test.
func delayFor(t *testing.T, delay *time.Duration, d time.Duration) {
	old := *delay
	*delay = d
	t.Cleanup(func() { *delay = old })
}

// holdDeletes makes deferred deletes wait for a frame to ride with, or for
// the barrier, for the rest of the test.
func holdDeletes(t *testing.T) { delayFor(t, &deleteDelay, time.Hour) }

// releasedOverTCP makes a value on the server, reads it and releases it,
// over tcp, and returns the pair.
func releasedOverTCP(t *testing.T) (server, client *Worker) {
	server, client = addPair(t, "tcp")
	ctx := context.Background()
	r, err := Remote[int64](ctx, client, "server", "add", [2]int64{40, 2})
	if err != nil {
		t.Fatal(err)
	}
	if v, err := r.ToHere(ctx); err != nil || v != 42 {
		t.Fatal(v, err)
	}
	r.Release()
	return server, client
}

// TestDeferredDeleteRidesWithTheNextFrame: over tcp a delete waits, and
// the next frame to its owner takes it along, ahead of itself: once a call
// made after the Release has returned, the owner has freed the value.
func TestDeferredDeleteRidesWithTheNextFrame(t *testing.T) {
	holdDeletes(t)
	server, client := releasedOverTCP(t)
	time.Sleep(20 * time.Millisecond) // a delete sent at once would have arrived
	if n := server.DebugInfo().Counters.Owners; n != 1 {
		t.Fatalf("the owner holds %d values before the next frame; want the one whose delete waits", n)
	}
	if out := client.DebugInfo().Outgoing; out != 1 {
		t.Fatalf("the client has %d frames outgoing; want the waiting delete", out)
	}
	if v, err := Call[int64](context.Background(), client, "server", "add", [2]int64{1, 2}); err != nil || v != 3 {
		t.Fatal(v, err)
	}
	if n := server.DebugInfo().Counters.Owners; n != 0 {
		t.Fatalf("the owner holds %d values after a call that followed the Release", n)
	}
}

// TestDeferredDeleteLeavesAlone: with no frame to ride with, the delete
// leaves by itself after deleteDelay.
func TestDeferredDeleteLeavesAlone(t *testing.T) {
	server, _ := releasedOverTCP(t)
	deadline := time.Now().Add(5 * time.Second)
	for server.DebugInfo().Counters.Owners != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the owner still holds the value 5 s after its only reference was released")
		}
		time.Sleep(time.Millisecond)
	}
}

// TestShutdownSendsDeferredDeletes: a graceful shutdown right after a
// Release neither waits for deleteDelay nor reports the value as leaked:
// the barrier sends a waiting delete when it finds one.
func TestShutdownSendsDeferredDeletes(t *testing.T) {
	holdDeletes(t)
	server, client := releasedOverTCP(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	errs := make(chan error, 2)
	for _, w := range []*Worker{server, client} {
		go func() { errs <- w.Shutdown(ctx) }()
	}
	for range 2 {
		if err := <-errs; err != nil {
			var leak *LeakError
			if errors.As(err, &leak) {
				t.Fatalf("shutdown reports a leak: %v", err)
			}
			t.Fatal(err)
		}
	}
}

// TestDeferredDeleteAfterClose: a worker closed while a delete waits, its
// timer firing afterwards, neither sends nor panics, and its owner still
// reclaims the value (the holder is gone).
func TestDeferredDeleteAfterClose(t *testing.T) {
	delayFor(t, &deleteDelay, 5*time.Millisecond)
	server, client := releasedOverTCP(t)
	client.Close()
	time.Sleep(4 * deleteDelay) // the timer fires on a closed worker
	deadline := time.Now().Add(5 * time.Second)
	for server.DebugInfo().Counters.Owners != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the owner still holds the value 5 s after its only holder closed")
		}
		time.Sleep(time.Millisecond)
	}
}
