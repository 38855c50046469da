package worker_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rrefkit/rref/runtime/worker"
)

// Three workers in one process: A makes a value on B with Remote, passes
// the reference to C, which fetches the value from B; the value is freed on
// B once the last reference is released.
func Example() {
	ctx := context.Background()
	setup := func(w *worker.Worker) {
		switch w.Name() {
		case "B":
			worker.Register(w, "add", func(ctx context.Context, x [2]int) (int, error) { return x[0] + x[1], nil })
		case "C":
			worker.Register(w, "double", func(ctx context.Context, r *worker.RRef[int]) (int, error) {
				v, err := r.ToHere(ctx)
				return 2 * v, err
			})
		}
	}
	ws, err := worker.NewGroup([]string{"A", "B", "C"}, worker.Config{Setup: setup})
	if err != nil {
		fmt.Println(err)
		return
	}
	r, _ := worker.Remote[int](ctx, ws[0], "B", "add", [2]int{1, 2})
	d, _ := worker.Call[int](ctx, ws[0], "C", "double", r)
	r.Release()
	fmt.Println(d, worker.ShutdownGroup(ctx, ws))
	// Output: 6 <nil>
}

// A call whose types are not the function's is refused before it runs.
func ExampleCall_typeMismatch() {
	ctx := context.Background()
	setup := func(w *worker.Worker) {
		worker.Register(w, "add", func(ctx context.Context, x [2]int) (int, error) { return x[0] + x[1], nil })
	}
	ws, _ := worker.NewGroup([]string{"A", "B"}, worker.Config{Setup: setup})
	defer worker.ShutdownGroup(ctx, ws)
	_, err := worker.Call[string](ctx, ws[0], "B", "add", [2]int{1, 2})
	fmt.Println(err)
	// Output: worker: type mismatch: add on B takes [2]int and returns int; the caller's call takes [2]int and returns string
}

// A Func declares a function's types once: registering and calling it
// need no type arguments.
func ExampleFunc() {
	ctx := context.Background()
	add := worker.NewFunc[[2]int, int]("add")
	setup := func(w *worker.Worker) {
		add.Register(w, func(ctx context.Context, x [2]int) (int, error) { return x[0] + x[1], nil })
	}
	ws, _ := worker.NewGroup([]string{"A", "B"}, worker.Config{Setup: setup})
	defer worker.ShutdownGroup(ctx, ws)
	sum, err := add.Call(ctx, ws[0], "B", [2]int{1, 2})
	r, _ := add.Remote(ctx, ws[0], "B", [2]int{3, 4})
	v, _ := r.ToHere(ctx)
	r.Release()
	later, _ := add.Go(ctx, ws[0], "B", [2]int{5, 6}).Wait(ctx)
	fmt.Println(sum, err, v, later)
	// Output: 3 <nil> 7 11
}

// ErrNotFound is an application's error, listed in Config.Errors on every
// worker so that it keeps its identity across the wire.
var ErrNotFound = errors.New("inventory: not found")

// A function's error that matches a registered one is matched on the
// caller with errors.Is; the message names the function and the worker.
func ExampleConfig_errors() {
	ctx := context.Background()
	setup := func(w *worker.Worker) {
		worker.Register(w, "stock", func(ctx context.Context, item string) (int, error) {
			return 0, fmt.Errorf("item %q: %w", item, ErrNotFound)
		})
	}
	ws, _ := worker.NewGroup([]string{"A", "B"}, worker.Config{Setup: setup, Errors: []error{ErrNotFound}})
	defer worker.ShutdownGroup(ctx, ws)
	_, err := worker.Call[int](ctx, ws[0], "B", "stock", "bolts")
	fmt.Println(errors.Is(err, ErrNotFound))
	fmt.Println(err)
	// Output:
	// true
	// worker: function stock on B failed: item "bolts": inventory: not found
}

// The caller's deadline travels with the call: the function sees it, and
// its context ends when the caller stops waiting.
func ExampleCall_deadline() {
	ctx := context.Background()
	setup := func(w *worker.Worker) {
		worker.Register(w, "slow", func(ctx context.Context, _ int) (int, error) {
			<-ctx.Done() // ends when the caller's deadline passes
			return 0, ctx.Err()
		})
	}
	ws, _ := worker.NewGroup([]string{"A", "B"}, worker.Config{Setup: setup})
	defer worker.ShutdownGroup(ctx, ws)
	dctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	_, err := worker.Call[int](dctx, ws[0], "B", "slow", 0)
	fmt.Println(errors.Is(err, context.DeadlineExceeded))
	// Output: true
}
