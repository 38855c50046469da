package worker

import (
	"context"
	"errors"
	groupwire "github.com/rrefkit/rref/generated/group"
	"strings"
	"testing"
	"time"
)

// A worker idle on its own must not close while a call to it is in flight:
// here every protocol message is held back 30 ms (jitter), so B is idle
// when both start shutting down, and A's call only reaches it later.
func TestShutdownWaitsForMessagesInFlight(t *testing.T) {
	ws, err := NewGroup([]string{"A", "B"}, Config{Logger: quiet, jitter: func() time.Duration { return 30 * time.Millisecond }})
	if err != nil {
		t.Fatal(err)
	}
	Register(ws[1], "add", func(ctx context.Context, x [2]int) (int, error) { return x[0] + x[1], nil })
	ctx := ctxT(t)
	sum := Go[int](ctx, ws[0], "B", "add", [2]int{20, 22})
	if err := ShutdownGroup(ctx, ws); err != nil {
		t.Fatal(err)
	}
	if v, err := sum.Wait(ctx); err != nil || v != 42 {
		t.Fatalf("call in flight at shutdown: %d, %v", v, err)
	}
}

// Shutdown is a barrier: a peer that never joins it holds it up, and the
// leak error says so.
func TestShutdownNamesPeerOutsideBarrier(t *testing.T) {
	ws := group(t, "A", "B")
	defer ws[1].Close()
	sctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err := ws[0].Shutdown(sctx)
	var le *LeakError
	if !errors.As(err, &le) || !strings.Contains(le.Waiting, "B has not called Shutdown") {
		t.Fatalf("shutdown with a peer outside the barrier: %v", err)
	}
}

// A closed peer does not hold the barrier up.
func TestShutdownSkipsDeadPeers(t *testing.T) {
	ws := group(t, "A", "B", "C")
	ws[2].Close()
	if err := ShutdownGroup(ctxT(t), ws[:2]); err != nil {
		t.Fatal(err)
	}
}

func TestBarrierReportRoundTrip(t *testing.T) {
	r := barrierReport{round: 7, idle: true, counts: counts{sent: []uint64{0, 3, 1 << 40}, taken: []uint64{0, 2, 9}}}
	got, err := consumeBarrier(appendBarrier(nil, r), 3)
	if err != nil || got.round != 7 || !got.idle || got.sent[2] != 1<<40 || got.taken[1] != 2 {
		t.Fatalf("round trip: %+v %v", got, err)
	}
	tag := byte(groupwire.FrameVersion)
	code := byte(groupwire.CodeBarrierReport)
	for _, bad := range [][]byte{nil, {tag}, {tag, code, 1, 2}, {tag, code, 1, 1, 2, 0, 0, 0, 0},
		append(appendBarrier(nil, r), 0), appendBarrier(nil, barrierReport{counts: counts{sent: []uint64{1}, taken: []uint64{1}}}),
		groupwire.AppendFrame(nil, &groupwire.Hello{})} {
		if _, err := consumeBarrier(bad, 3); !errors.Is(err, errBadBarrier) {
			t.Errorf("%x: %v", bad, err)
		}
	}
}

// FuzzBarrierReport: no input makes the decoder panic, and what it accepts
// encodes back to the same bytes.
func FuzzBarrierReport(f *testing.F) {
	f.Add(appendBarrier(nil, barrierReport{round: 1, idle: true, counts: counts{sent: []uint64{0, 1}, taken: []uint64{2, 0}}}))
	f.Add([]byte{byte(groupwire.FrameVersion), byte(groupwire.CodeBarrierReport), 0x80})
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := consumeBarrier(b, 2)
		if err != nil {
			return
		}
		if again := appendBarrier(nil, r); string(again) != string(b) {
			t.Fatalf("%x decoded to %+v, encodes to %x", b, r, again)
		}
	})
}
