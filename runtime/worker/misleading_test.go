package worker_test

import (
	"context"
	"errors"
	"strings"
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
