package worker

import (
	"context"
	"errors"
	"regexp"
	"strconv"
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

// tooLargeCallTimeout is far above tooLargeBound: an answer that waited
// for the sweeper would show.
const (
	tooLargeCallTimeout = 30 * time.Second
	tooLargeBound       = 10 * time.Second
)

// A result or value over the message limit came back as the function's
// own error (a *UserError, "the function on B failed" where none ran, and
// errors.Is(err, ErrTooLarge) false). It is ErrTooLarge now, naming the
// size and the limit, blaming no function, at once.
func TestTooLargeResultsAndValuesAreErrTooLarge(t *testing.T) {
	const limit = 64 << 10
	ws, err := NewGroup([]string{"A", "B"}, Config{Logger: quiet, CallTimeout: tooLargeCallTimeout,
		FIFO: fifo.Config{MaxMessage: limit}})
	if err != nil {
		t.Fatal(err)
	}
	a, b := ws[0], ws[1]
	Register(b, "blob", func(ctx context.Context, n int) ([]byte, error) { return make([]byte, n), nil })
	Register(b, "stored", func(ctx context.Context, n int) (*RRef[[]byte], error) { return NewRRef(b, make([]byte, n)) })
	ctx := context.Background() // no deadline: only CallTimeout would end a wait
	size := regexp.MustCompile(`(\d+) bytes`)
	check := func(what string, start time.Time, err error) {
		t.Helper()
		t.Logf("%s: %v", what, err)
		if took := time.Since(start); took > tooLargeBound {
			t.Errorf("%s: failed after %v, not at once", what, took)
		}
		var ue *UserError
		switch {
		case !errors.Is(err, ErrTooLarge):
			t.Errorf("%s: %v, want ErrTooLarge", what, err)
		case errors.As(err, &ue) || strings.Contains(err.Error(), "failed"):
			t.Errorf("%s: %v blames a function", what, err)
		case !strings.Contains(err.Error(), "limit "+strconv.Itoa(limit)):
			t.Errorf("%s: %v does not name the limit", what, err)
		default:
			m := size.FindStringSubmatch(err.Error())
			if m == nil {
				t.Errorf("%s: %v does not name a size", what, err)
			} else if n, _ := strconv.Atoi(m[1]); n <= limit {
				t.Errorf("%s: %v does not name a size over the limit", what, err)
			}
		}
	}
	start := time.Now()
	_, err = Call[[]byte](ctx, a, "B", "blob", 2*limit)
	check("a call's result", start, err)
	if err != nil && !strings.Contains(err.Error(), "blob on B") {
		t.Errorf("a call's result: %v does not name the call", err)
	}

	r, err := Remote[[]byte](ctx, a, "B", "blob", 2*limit)
	if err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	_, err = r.ToHere(ctx)
	check("a Remote's value", start, err)
	r.Release()

	r, err = Call[*RRef[[]byte]](ctx, a, "B", "stored", 2*limit)
	if err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	_, err = r.ToHere(ctx)
	check("a NewRRef's value", start, err)
	if err != nil && strings.Contains(err.Error(), "function") {
		t.Errorf("a NewRRef's value: %v speaks of a function, where none made it", err)
	}
	r.Release()
	shutdown(t, ws)
}
