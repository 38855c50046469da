package main

import (
	"context"
	"fmt"
	"io"
	"runtime"

	"github.com/rrefkit/rref/runtime/observe"
	"github.com/rrefkit/rref/runtime/worker"
)

// runLocal runs a server and trainers in this process.
func runLocal(out io.Writer, o options) error {
	names := []string{"server"}
	for i := 1; i <= o.trainers; i++ {
		names = append(names, fmt.Sprintf("t%d", i))
	}
	s := newServer(len(names), 0)
	setup := func(w *worker.Worker) {
		if w.Name() == "server" {
			s.register(w) // before any trainer can call
		}
	}
	ws, err := worker.NewGroup(names, worker.Config{Setup: setup, RecordRefSites: o.sites})
	if err != nil {
		return err
	}
	ctx := context.Background()
	if o.observe != "" {
		addr, err := observe.Serve(ctx, ws[0], o.observe, observe.Members(ws[1:]...)) // the trainers' references too
		if err != nil {
			worker.ShutdownGroup(ctx, ws)
			return err
		}
		fmt.Fprintf(out, "server: metrics on http://%s/metrics, counters on http://%s/debug/rref\n", addr, addr)
	}
	fmt.Fprintf(out, "loss before: %.4f\n", s.loss())
	trainers := make([]*trainer, len(ws)-1)
	errs := make(chan error, len(trainers))
	for i, w := range ws[1:] {
		trainers[i] = &trainer{w: w, steps: o.steps, compute: o.compute, forget: o.forget && i == 0}
		go func(t *trainer) { errs <- t.train(ctx) }(trainers[i])
	}
	for range trainers {
		if err := <-errs; err != nil {
			worker.ShutdownGroup(ctx, ws)
			return err
		}
	}
	updates, loss := s.progress()
	fmt.Fprintf(out, "loss after %d updates: %.6f\n", updates, loss)
	sctx, cancel := context.WithTimeout(ctx, o.shutdownTimeout)
	defer cancel()
	err = worker.ShutdownGroup(sctx, ws) // a barrier: all together
	runtime.KeepAlive(trainers)          // with -forget, t1's cached snapshot is still held
	if err != nil {
		return err
	}
	fmt.Fprintln(out, "all workers shut down; no parameter snapshot leaked")
	return nil
}
