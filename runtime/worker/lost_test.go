package worker

import (
	"context"
	"errors"
	"testing"
	"time"
)

// An RRef cut off from its value still travels, as a cut copy: a function
// that returns an RRef whose owner died returns normally, and its caller's
// copy fails ToHere with ErrOwnerFailed (the soak once saw "function keep
// failed: core: handle is lost" as an unexplained user error). A clone of a
// cut RRef is cut the same way, so a function that returns the clone of an
// RRef it keeps returns normally too (issue 35: it failed with ErrLost).
// Passing an RRef already released fails with ErrDeleted, not as a peer
// failure.
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
	if err != nil {
		t.Fatalf("returning an RRef whose owner died: %v", err)
	}
	if v, err := got.ToHere(ctx); !errors.Is(err, ErrOwnerFailed) {
		t.Errorf("the caller's copy of a cut RRef: ToHere %d, %v; want ErrOwnerFailed", v, err)
	} else if want := "worker: owner failed: C"; err.Error() != want {
		t.Errorf("ToHere of a value whose owner died: %q, want %q, naming the owner", err, want)
	}
	if o := got.Owner(); o != "C" { // the soak once saw a cut copy owned by worker #0
		t.Errorf("the caller's copy of a cut RRef is owned by %q, want C", o)
	}
	got.Release()

	for { // until A knows C died
		if _, err := r.ToHere(ctx); errors.Is(err, ErrOwnerFailed) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	cl, err := r.Clone()
	if err != nil {
		t.Fatalf("Clone of an RRef whose owner died: %v", err)
	}
	if v, err := cl.ToHere(ctx); !errors.Is(err, ErrOwnerFailed) {
		t.Errorf("a clone of an RRef whose owner died: ToHere %d, %v; want ErrOwnerFailed", v, err)
	}
	if o := cl.Owner(); o != "C" {
		t.Errorf("a clone of an RRef whose owner died is owned by %q, want C", o)
	}
	cl.Release()
	Register(a, "returnKept", func(ctx context.Context, _ int) (*RRef[int], error) { return r.Clone() })
	kept, err := Call[*RRef[int]](ctx, b, "A", "returnKept", 0)
	if err != nil {
		t.Fatalf("returning the clone of an RRef whose owner died: %v", err)
	}
	if v, err := kept.ToHere(ctx); !errors.Is(err, ErrOwnerFailed) {
		t.Errorf("the caller's copy of a returned clone: ToHere %d, %v; want ErrOwnerFailed", v, err)
	}
	kept.Release()
	if v, err := r.ToHere(ctx); !errors.Is(err, ErrOwnerFailed) {
		t.Errorf("the RRef kept after returning its clone: ToHere %d, %v; want ErrOwnerFailed", v, err)
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
