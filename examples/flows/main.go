// Command flows runs the four flows of the RRef protocol's source document
// between workers in one process, and prints what happens.
//
//	go run ./examples/flows
package main

import (
	"context"
	"fmt"
	"io"
	"log"
	"os"
	"time"

	"github.com/rrefkit/rref/runtime/worker"
)

func main() {
	if err := run(os.Stdout); err != nil {
		log.Fatal(err)
	}
}

func run(out io.Writer) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ws, err := worker.NewGroup([]string{"A", "B", "C"}, worker.Config{})
	if err != nil {
		return err
	}
	a, b := ws[0], ws[1]
	for _, w := range ws {
		worker.Register(w, "add", func(ctx context.Context, x [2]int) (int, error) { return x[0] + x[1], nil })
		worker.Register(w, "double", func(ctx context.Context, r *worker.RRef[int]) (int, error) {
			v, err := r.ToHere(ctx)
			return 2 * v, err
		})
	}

	// Flow 1: the user returns the RRef to the owner: remote + to_here.
	r, err := worker.Remote[int](ctx, a, "B", "add", [2]int{1, 2})
	if err != nil {
		return err
	}
	v, err := r.ToHere(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "flow 1: A made a value on %s and fetched it: %d\n", r.Owner(), v)

	// Flow 2: the user passes the RRef to the owner as an argument.
	d, err := worker.Call[int](ctx, a, "B", "double", r)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "flow 2: A passed its RRef to the owner B, which doubled it: %d\n", d)

	// Flow 4: the user passes the RRef to another user.
	d, err = worker.Call[int](ctx, a, "C", "double", r)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "flow 4: A passed its RRef to the user C, which doubled it: %d\n", d)
	r.Release()

	// Flow 3: the owner passes its RRef to a user.
	local, err := worker.NewRRef(b, 21)
	if err != nil {
		return err
	}
	d, err = worker.Call[int](ctx, b, "C", "double", local)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "flow 3: the owner B passed its RRef to C, which doubled it: %d\n", d)
	local.Release()

	for _, w := range ws {
		info := w.DebugInfo()
		fmt.Fprintf(out, "%s: %d messages sent, owners=%d forks=%d\n", w.Name(), info.MessagesSent, info.Owners, info.Forks)
	}
	errs := make(chan error, len(ws))
	for _, w := range ws {
		go func(w *worker.Worker) { errs <- w.Shutdown(ctx) }(w)
	}
	for range ws {
		if err := <-errs; err != nil {
			return err
		}
	}
	fmt.Fprintln(out, "every worker shut down clean: nothing leaked")
	return nil
}
