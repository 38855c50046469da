package worker

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rrefkit/rref/fifo"
)

// A message too large for the transport used to be taken for the peer's
// death: the two workers were cut apart for good. Now only that call fails,
// whichever side's message is too large, and the pair goes on.
func TestTooLargeFailsOnlyItsCall(t *testing.T) {
	const limit = 64 << 10
	ws, err := NewGroup([]string{"A", "B"}, Config{Logger: quiet, CallTimeout: 10 * time.Second,
		FIFO: fifo.Config{MaxMessage: limit}})
	if err != nil {
		t.Fatal(err)
	}
	a, b := ws[0], ws[1]
	Register(b, "len", func(ctx context.Context, p []byte) (int, error) { return len(p), nil })
	Register(b, "blob", func(ctx context.Context, n int) ([]byte, error) { return make([]byte, n), nil })
	ctx := ctxT(t)
	alive := func(what string) {
		t.Helper()
		if n, err := Call[int](ctx, a, "B", "len", []byte("ok")); err != nil || n != 2 {
			t.Fatalf("after %s the pair is cut: %d, %v", what, n, err)
		}
	}
	if _, err := Call[int](ctx, a, "B", "len", make([]byte, limit+1)); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("a call with arguments over the limit: %v, want ErrTooLarge", err)
	}
	alive("too large arguments")
	if _, err := Remote[int](ctx, a, "B", "len", make([]byte, 2*limit)); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("a Remote with arguments over the limit: %v, want ErrTooLarge", err)
	}
	alive("too large Remote arguments")
	if _, err := Call[[]byte](ctx, a, "B", "blob", limit+100); err == nil || !strings.Contains(err.Error(), ErrTooLarge.Error()) {
		t.Fatalf("a call whose result is over the limit: %v, want an error saying so", err)
	}
	alive("a too large result")
	r, err := Remote[[]byte](ctx, a, "B", "blob", limit+100)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.ToHere(ctx); err == nil || !strings.Contains(err.Error(), ErrTooLarge.Error()) {
		t.Fatalf("fetching a value over the limit: %v, want an error saying so", err)
	}
	r.Release()
	alive("a too large value")
	if got, err := Call[[]byte](ctx, a, "B", "blob", limit/2); err != nil || len(got) != limit/2 {
		t.Fatalf("a large result within the limit: %d bytes, %v", len(got), err)
	}
	shutdown(t, ws)
}
