package worker

import (
	"context"
	"errors"
	"testing"
	"time"
)

// An RRef that cannot travel is reported by what happened to it, not as
// a peer failure or the function's own error: a function that returns an
// RRef whose owner died makes its caller's Call fail with ErrLost (the
// soak saw "function keep failed: core: handle is lost" as an unexplained
// user error); cloning it fails with ErrLost, and passing an RRef already
// released fails with ErrDeleted.
func TestRRefThatCannotTravel(t *testing.T) {
	ws, err := NewGroup([]string{"A", "B", "C"}, Config{})
	if err != nil {
		t.Fatal(err)
	}
	a, b, c := ws[0], ws[1], ws[2]
	defer func() {
		for _, w := range ws {
			w.Close()
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	Register(c, "add", func(ctx context.Context, x [2]int) (int, error) { return x[0] + x[1], nil })
	started := make(chan struct{})
	Register(b, "keepPastOwner", func(ctx context.Context, r *RRef[int]) (*RRef[int], error) {
		close(started)
		for { // until this worker knows the owner died
			if _, err := r.ToHere(ctx); err != nil {
				if !errors.Is(err, ErrOwnerFailed) {
					return nil, err
				}
				return r, nil
			}
			time.Sleep(time.Millisecond)
		}
	})
	r, err := Remote[int](ctx, a, "C", "add", [2]int{1, 2})
	if err != nil {
		t.Fatal(err)
	}
	if v, err := r.ToHere(ctx); err != nil || v != 3 {
		t.Fatalf("ToHere: %d, %v", v, err)
	}
	f := Go[*RRef[int]](ctx, a, "B", "keepPastOwner", r)
	<-started
	c.Close()
	got, err := f.Wait(ctx)
	if !errors.Is(err, ErrLost) {
		t.Fatalf("a result RRef whose owner died: %v, %v; want ErrLost", got, err)
	}
	var ue *UserError
	if errors.As(err, &ue) {
		t.Errorf("reported as the function's own error: %v", err)
	}

	for { // until A knows C died
		if _, err := r.ToHere(ctx); errors.Is(err, ErrOwnerFailed) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	if cl, err := r.Clone(); !errors.Is(err, ErrLost) {
		t.Errorf("Clone of an RRef whose owner died: %v, %v; want ErrLost", cl, err)
	}

	Register(b, "take", func(ctx context.Context, r *RRef[int]) (int, error) { return 0, nil })
	mine, err := NewRRef(a, 5)
	if err != nil {
		t.Fatal(err)
	}
	mine.Release()
	if _, err := Call[int](ctx, a, "B", "take", mine); !errors.Is(err, ErrDeleted) || errors.Is(err, ErrPeerFailed) {
		t.Errorf("passing a released RRef: %v, want ErrDeleted", err)
	}
}
