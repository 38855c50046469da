package worker

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rrefkit/rref/fifo"
)

// holdAcksBack makes held-back RemoteRets wait for the creator's fetch, or
// for the barrier, for the rest of the test.
func holdAcksBack(t *testing.T) {
	delayFor(t, &ackDelay, time.Hour)
}

// waitFreed waits until w holds no value, and fails the test after 5 s.
func waitFreed(t *testing.T, w *Worker, why string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for w.DebugInfo().Counters.Owners != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the owner still holds %d values 5 s after %s", w.DebugInfo().Counters.Owners, why)
		}
		time.Sleep(time.Millisecond)
	}
}

// waitSentCount is how many messages named name w has sent, once that
// reaches want or 5 s have passed: a sender counts a frame when its Send
// returns, which may be after the peer has acted on it (a CI run read 199
// of 200 deletes with every value already freed).
func waitSentCount(w *Worker, name string, want uint64) uint64 {
	n := w.Metrics().Messages["out"][name]
	for deadline := time.Now().Add(5 * time.Second); n < want && time.Now().Before(deadline); n = w.Metrics().Messages["out"][name] {
		time.Sleep(time.Millisecond)
	}
	return n
}

// TestFetchAnswerConfirmsTheCreator: with RemoteRets held back an hour, a
// Remote followed by ToHere and Release must still free its value, on
// every transport: the answer to the creator's fetch is its only
// confirmation, and no RemoteRet leaves at all.
func TestFetchAnswerConfirmsTheCreator(t *testing.T) {
	holdAcksBack(t)
	for _, transport := range []string{"mem", "shm", "tcp"} {
		t.Run(transport, func(t *testing.T) {
			server, client := addPair(t, transport)
			ctx := ctxT(t)
			const rounds = 200
			for i := range rounds {
				r, err := Remote[int64](ctx, client, "server", "add", [2]int64{int64(i), 1})
				if err != nil {
					t.Fatal(err)
				}
				if v, err := r.ToHere(ctx); err != nil || v != int64(i)+1 {
					t.Fatalf("round %d: %d, %v", i, v, err)
				}
				r.Release()
			}
			waitFreed(t, server, "every reference was released")
			if n := server.Metrics().Messages["out"]["RemoteRet"]; n != 0 {
				t.Fatalf("the owner sent %d RemoteRets for %d Remotes each fetched at once; want none", n, rounds)
			}
			if n := waitSentCount(client, "UserDelete", rounds); n != rounds {
				t.Fatalf("the client sent %d deletes for %d released Remotes", n, rounds)
			}
		})
	}
}

// TestHeldAckLeavesWithoutAFetch: a creator that never fetches is
// confirmed when the owner's timer fires, and its released value freed.
func TestHeldAckLeavesWithoutAFetch(t *testing.T) {
	server, client := addPair(t, "tcp")
	ctx := ctxT(t)
	r, err := Remote[int64](ctx, client, "server", "add", [2]int64{40, 2})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for !r.Confirmed() {
		if time.Now().After(deadline) {
			t.Fatal("the creator is not confirmed 5 s after its Remote")
		}
		time.Sleep(time.Millisecond)
	}
	r.Release()
	waitFreed(t, server, "its only reference was released")
	if n := waitSentCount(server, "RemoteRet", 1); n != 1 {
		t.Fatalf("the owner sent %d RemoteRets; want the one its timer sent", n)
	}
}

// TestGroupEndsSendHeldAcks: with RemoteRets held back an hour, a Remote
// that was never fetched and is released does not keep its group from
// ending: Settle, and the shutdown barrier on its own, send the held ack,
// and the creator's delete follows, so neither waits for the hour nor
// reports a leak.
func TestGroupEndsSendHeldAcks(t *testing.T) {
	holdAcksBack(t)
	for _, transport := range []string{"mem", "tcp"} {
		for _, settleFirst := range []bool{true, false} {
			name := transport + "/shutdown"
			if settleFirst {
				name = transport + "/settle"
			}
			t.Run(name, func(t *testing.T) {
				server, client, r := heldRemote(t, transport)
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				r.Release()
				if settleFirst {
					if err := SettleGroup(ctx, []*Worker{server, client}); err != nil {
						t.Fatalf("settle with a held ack: %v", err)
					}
					if n := server.DebugInfo().Counters.Owners; n != 0 {
						t.Fatalf("after settling the owner holds %d values", n)
					}
				}
				if err := ShutdownGroup(ctx, []*Worker{server, client}); err != nil {
					t.Fatal(err)
				}
			})
		}
	}
}

// heldRemote starts a pair over transport and makes a value on the server
// by a Remote from the client, whose RemoteRet the server then holds back.
func heldRemote(t *testing.T, transport string) (server, client *Worker, r *RRef[int64]) {
	t.Helper()
	server, client = addPair(t, transport)
	r, err := Remote[int64](ctxT(t), client, "server", "add", [2]int64{40, 2})
	if err != nil {
		t.Fatal(err)
	}
	waitHeld(t, server)
	return server, client, r
}

// waitHeld waits until w holds a RemoteRet back.
func waitHeld(t *testing.T, w *Worker) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		w.acks.mu.Lock()
		n := len(w.acks.fresh) + len(w.acks.old)
		w.acks.mu.Unlock()
		if n > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the owner holds no RemoteRet back 5 s after the Remote")
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// TestSettleWaitsForAFlushUnderWay: a flush that has taken the held acks
// off the list, and not yet had the core send them, is work: a Settle
// meanwhile must not find the group quiet, or it would return while the
// creator waits for its RemoteRet (a review saw it with the flush
// stalled, as a preempted timer goroutine would be).
func TestSettleWaitsForAFlushUnderWay(t *testing.T) {
	holdAcksBack(t)
	server, client, r := heldRemote(t, "mem")
	ctx := ctxT(t)
	r.Release()
	stalled, resume := make(chan struct{}), make(chan struct{})
	beforeAckFlush = func() {
		beforeAckFlush = nil // the stalled flush only
		close(stalled)
		<-resume
	}
	t.Cleanup(func() { beforeAckFlush = nil })
	server.ackTick() // the fresh ack ages: nothing to send yet
	go server.ackTick()
	<-stalled
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	err := SettleGroup(short, []*Worker{server, client})
	cancel()
	if !errors.Is(err, ErrNotSettled) {
		t.Fatalf("settle while a flush is stalled: %v; want ErrNotSettled", err)
	}
	close(resume)
	if err := SettleGroup(ctx, []*Worker{server, client}); err != nil {
		t.Fatal(err)
	}
	if n := server.DebugInfo().Counters.Owners; n != 0 {
		t.Fatalf("after settling the owner holds %d values", n)
	}
}

// TestHeldAckWaitsATickAtLeast: the timer sends an ack on the second tick
// after it was held, never the first, so one held just before a tick still
// waits its whole delay for the creator's fetch.
func TestHeldAckWaitsATickAtLeast(t *testing.T) {
	holdAcksBack(t)
	server, _, r := heldRemote(t, "mem")
	defer r.Release()
	server.ackTick()
	time.Sleep(20 * time.Millisecond) // a RemoteRet sent would have arrived
	if r.Confirmed() {
		t.Fatal("the first tick after the ack was held sent it")
	}
	server.ackTick()
	deadline := time.Now().Add(5 * time.Second)
	for !r.Confirmed() {
		if time.Now().After(deadline) {
			t.Fatal("the second tick did not send the held ack")
		}
		time.Sleep(time.Millisecond)
	}
}

// TestTooLargeValueStillConfirms: the answer to a creator's fetch is its
// confirmation, so when the value is too large for the transport and an
// error goes back in its place, the error must confirm the fork too, or
// the creator's delete would wait for a RemoteRet that never comes (held
// back an hour here) and the value would leak.
func TestTooLargeValueStillConfirms(t *testing.T) {
	holdAcksBack(t)
	const limit = 64 << 10
	ws, err := NewGroup([]string{"A", "B"}, Config{Logger: quiet, CallTimeout: 10 * time.Second,
		FIFO: fifo.Config{MaxMessage: limit}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { ws[0].Close(); ws[1].Close() }()
	a, b := ws[0], ws[1]
	Register(b, "blob", func(ctx context.Context, n int) ([]byte, error) { return make([]byte, n), nil })
	ctx := ctxT(t)
	r, err := Remote[[]byte](ctx, a, "B", "blob", limit+100)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.ToHere(ctx); err == nil || !strings.Contains(err.Error(), ErrTooLarge.Error()) {
		t.Fatalf("fetching a value over the limit: %v, want an error saying so", err)
	}
	if !r.Confirmed() {
		t.Fatal("the creator is not confirmed by the answer to its fetch")
	}
	r.Release()
	waitFreed(t, b, "its only reference was released")
}

// TestHeldAckAfterClose: a worker closed while it holds an ack back, its
// timer firing afterwards, neither sends nor panics.
func TestHeldAckAfterClose(t *testing.T) {
	delayFor(t, &ackDelay, 5*time.Millisecond)
	server, _, r := heldRemote(t, "mem")
	server.Close()
	time.Sleep(4 * ackDelay) // the timer fires on a closed worker
	if n := server.Metrics().Messages["out"]["RemoteRet"]; n != 0 {
		t.Fatalf("a closed owner sent %d RemoteRets", n)
	}
	if _, err := r.ToHere(ctxT(t)); !errors.Is(err, ErrOwnerFailed) {
		t.Fatalf("fetching from a closed owner: %v", err)
	}
}
