package worker_test

import (
	"context"
	"fmt"

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
