// Command readme is the program the README's "Five minutes with the runtime" shows:
// three workers in one process, an RRef made on B by A's Remote, passed to
// C, fetched there from B, and released. Its test runs it.
package main

import (
	"context"
	"fmt"
	"log"

	"github.com/rrefkit/rref/runtime/worker"
)

func main() {
	ctx := context.Background()
	setup := func(w *worker.Worker) { // runs on each worker before any peer can call it
		switch w.Name() {
		case "B":
			worker.Register(w, "add", func(ctx context.Context, x [2]int) (int, error) { return x[0] + x[1], nil })
		case "C":
			worker.Register(w, "double", func(ctx context.Context, r *worker.RRef[int]) (int, error) {
				v, err := r.ToHere(ctx) // C fetches from the owner B
				return 2 * v, err
			})
		}
	}
	ws, err := worker.NewGroup([]string{"A", "B", "C"}, worker.Config{Setup: setup}) // or worker.Start across processes
	if err != nil {
		log.Fatal(err)
	}
	a := ws[0]
	r, _ := worker.Remote[int](ctx, a, "B", "add", [2]int{1, 2}) // returns at once
	d, _ := worker.Call[int](ctx, a, "C", "double", r)           // the RRef travels to C: 6
	r.Release()                                                  // B frees the value when the last reference is gone
	fmt.Println(d)
	worker.ShutdownGroup(ctx, ws) // a barrier: every worker closes once nothing is held or in flight
}
