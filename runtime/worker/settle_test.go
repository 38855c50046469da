package worker

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// SettleGroup must not return while a frame is in flight: every protocol
// message is held back 20 ms, so a check that looked only at the members
// (nothing running, nothing queued) would call the group quiet at once.
// The handles stay held: settling is not shutting down.
func TestSettleWaitsForFramesInFlight(t *testing.T) {
	ws, err := NewGroup([]string{"A", "B", "C"}, Config{Logger: quiet, jitter: func() time.Duration { return 20 * time.Millisecond }})
	if err != nil {
		t.Fatal(err)
	}
	defer closeAll(ws)
	ctx := ctxT(t)
	got := make(chan *RRef[int], 1)
	Register(ws[1], "echo", func(ctx context.Context, v int) (int, error) { return v, nil })
	Register(ws[2], "keep", func(ctx context.Context, r *RRef[int]) (int, error) { got <- r.Keep(); return 0, nil })
	r, err := Remote[int](ctx, ws[0], "B", "echo", 7)
	if err != nil {
		t.Fatal(err)
	}
	Go[int](ctx, ws[0], "C", "keep", r)
	if err := SettleGroup(ctx, ws); err != nil {
		t.Fatal(err)
	}
	// Quiet: C's function ran, and every fork C asked for is answered.
	select {
	case kept := <-got:
		for _, w := range ws {
			if d := w.DebugInfo(); d.Outgoing != 0 || d.PendingCalls != 0 {
				t.Errorf("%s not quiet after SettleGroup: %+v", w.Name(), d)
			}
		}
		if d := ws[2].DebugInfo(); d.PendingUsers != 0 {
			t.Errorf("C's fork not confirmed after SettleGroup: %+v", d.Counters)
		}
		if v, err := kept.ToHere(ctx); err != nil || v != 7 {
			t.Errorf("the passed RRef holds %d, %v", v, err)
		}
		kept.Release()
	default:
		t.Fatal("SettleGroup returned before the passed RRef arrived")
	}
	r.Release()
	if err := ShutdownGroup(ctx, ws); err != nil {
		t.Fatal(err)
	}
}

// After a member closes, the group is settled only once every live member
// has been told of it (its fetches failed, its forks dropped).
func TestSettleWaitsForFailureNotices(t *testing.T) {
	ws := group(t, "A", "B", "C")
	defer closeAll(ws)
	ctx := ctxT(t)
	r, err := Remote[int](ctx, ws[0], "B", "add", [2]int{1, 2})
	if err != nil {
		t.Fatal(err)
	}
	ws[1].Close()
	if err := SettleGroup(ctx, ws); err != nil {
		t.Fatal(err)
	}
	for _, w := range []*Worker{ws[0], ws[2]} {
		w.mu.Lock()
		mourned := w.mourned[ws[1].id]
		w.mu.Unlock()
		if !mourned {
			t.Errorf("%s not told of B's close when SettleGroup returned", w.Name())
		}
	}
	if _, err := r.ToHere(ctx); !errors.Is(err, ErrOwnerFailed) {
		t.Fatalf("fetch from the closed owner: %v", err)
	}
}

// A function that never returns keeps the group busy: SettleGroup returns
// ErrNotSettled when its context ends, and says who holds it up.
func TestSettleGivesUpWithItsContext(t *testing.T) {
	ws := group(t, "A", "B")
	release := make(chan struct{})
	defer func() { close(release); closeAll(ws) }()
	Register(ws[1], "block", func(ctx context.Context, _ int) (int, error) { <-release; return 0, nil })
	Go[int](ctxT(t), ws[0], "B", "block", 0)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	err := SettleGroup(ctx, ws)
	if !errors.Is(err, ErrNotSettled) || !strings.Contains(err.Error(), "B") {
		t.Fatalf("settle with a function running: %v", err)
	}
}

func closeAll(ws []*Worker) {
	for _, w := range ws {
		w.Close()
	}
}
