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
