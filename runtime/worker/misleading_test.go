package worker_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/rrefkit/rref/runtime/worker"
)

// Errors that misled a newcomer (issue 34): each test fails on the code
// that misled and passes on the fix.

// A nil *RRef, what a failed Remote returns, panicked in ToHere and in the
// deferred Release that typically follows. Every method now answers:
// ErrUnbound where it can fail, nothing where it reports.
func TestNilRRefMethodsReturnErrUnbound(t *testing.T) {
	ctx := context.Background()
	var r *worker.RRef[int]
	defer func() {
		if p := recover(); p != nil {
			t.Fatalf("a method of a nil *RRef panicked: %v", p)
		}
	}()
	if _, err := r.ToHere(ctx); !errors.Is(err, worker.ErrUnbound) {
		t.Errorf("ToHere: %v, want ErrUnbound", err)
	}
	if err := r.Release(); !errors.Is(err, worker.ErrUnbound) || !strings.Contains(err.Error(), "nil") {
		t.Errorf("Release: %v, want ErrUnbound saying the RRef is nil", err)
	}
	if _, err := r.Fetch(ctx).Wait(ctx); !errors.Is(err, worker.ErrUnbound) {
		t.Errorf("Fetch: %v", err)
	}
	if _, err := r.LocalValue(ctx); !errors.Is(err, worker.ErrUnbound) {
		t.Errorf("LocalValue: %v", err)
	}
	if _, err := r.Clone(); !errors.Is(err, worker.ErrUnbound) {
		t.Errorf("Clone: %v", err)
	}
	if r.Owner() != "" || r.IsOwner() || r.Confirmed() || r.Keep() != nil {
		t.Error("a nil RRef claims an owner, a confirmation or a reference kept")
	}
}

// Register("") was accepted, and NewGroup(nil) returned no workers and no
// error: both are mistakes a program should hear of at once.
func TestEmptyNamesAndGroupsRefused(t *testing.T) {
	for _, names := range [][]string{nil, {}} {
		ws, err := worker.NewGroup(names, worker.Config{})
		if err == nil || len(ws) != 0 || !strings.HasPrefix(err.Error(), "worker: ") {
			t.Errorf("NewGroup(%#v) = %d workers, %v; want an error", names, len(ws), err)
		}
	}
	if _, err := worker.Start(context.Background(), "A", nil, []byte("s"), worker.Config{}); err == nil {
		t.Error("Start with no peers: no error")
	}
	ws, err := worker.NewGroup([]string{"A", "B"}, worker.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer worker.ShutdownGroup(context.Background(), ws)
	id := func(ctx context.Context, x int) (int, error) { return x, nil }
	if err := worker.Register(ws[1], "", id); err == nil || !strings.Contains(err.Error(), "empty") {
		t.Errorf(`Register(""): %v, want an error naming the empty name`, err)
	}
	if err := worker.Register[int, int](ws[1], "nilfn", nil); err == nil {
		t.Error("Register of a nil function: no error")
	}
	if _, err := worker.Call[int](context.Background(), ws[0], "B", "", 1); !errors.Is(err, worker.ErrUnknownFunction) {
		t.Errorf(`a call of "" after the refused Register: %v, want ErrUnknownFunction`, err)
	}
}

// lockedBuffer is a log destination written by the workers' goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// explode panics two calls below the registered function, so that the
// frames carried must be more than the one that panicked.
func explode(ctx context.Context, n int) (int, error) { return detonate(n), nil }

func detonate(n int) int {
	var m map[int]int
	m[n] = n // a nil map: a runtime panic, which passes the runtime's own frames
	return n
}

// A panic in a registered function lost its stack (only "panic: ..." came
// back) and nothing logged it. The callee's logger now gets the whole
// stack, and the caller's error its first frames, from where it panicked.
func TestPanicStackLoggedAndCarried(t *testing.T) {
	var logs lockedBuffer
	ws, err := worker.NewGroup([]string{"A", "B"}, worker.Config{
		Logger: slog.New(slog.NewJSONHandler(&logs, nil)),
		Setup:  func(w *worker.Worker) { worker.Register(w, "explode", explode) },
	})
	if err != nil {
		t.Fatal(err)
	}
	defer worker.ShutdownGroup(context.Background(), ws)
	_, err = worker.Call[int](context.Background(), ws[0], "B", "explode", 7)
	var ue *worker.UserError
	if !errors.As(err, &ue) {
		t.Fatalf("a panicking function: %v, want a *UserError", err)
	}
	msg := err.Error()
	for _, want := range []string{"assignment to entry in nil map", "worker_test.detonate", "worker_test.explode", "misleading_test.go:"} {
		if !strings.Contains(msg, want) {
			t.Errorf("the caller's error does not carry %q:\n%s", want, msg)
		}
	}
	for _, noise := range []string{"runtime/debug", "callUser", "goroutine "} {
		if strings.Contains(msg, noise) {
			t.Errorf("the caller's error carries the runtime's frames (%q):\n%s", noise, msg)
		}
	}
	var rec struct{ Msg, Worker, Function, Panic, Stack string }
	for line := range strings.Lines(logs.String()) {
		if json.Unmarshal([]byte(line), &rec) == nil && strings.Contains(rec.Msg, "panic") {
			break
		}
		rec.Stack = ""
	}
	if rec.Worker != "B" || rec.Function != "explode" || !strings.Contains(rec.Panic, "nil map") ||
		!strings.Contains(rec.Stack, "worker_test.detonate") || !strings.Contains(rec.Stack, "goroutine ") {
		t.Errorf("the callee's log has no record of the panic with its stack:\n%s", logs.String())
	}
}
