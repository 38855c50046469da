package main

import (
	"context"
	"fmt"
	"time"

	"github.com/rrefkit/rref/runtime/worker"
)

// trainer fetches parameter snapshots from the server and sends gradients.
type trainer struct {
	w          *worker.Worker
	steps      int
	compute    time.Duration // how long a gradient takes, as if it were work
	crashAfter int           // with -crash-after: the step at which the trainer kills itself
	forget     bool          // with -forget: keep a clone of the first snapshot and never release it
	cached     *worker.RRef[[]float64]
}

// train runs steps of fetch-params, compute-gradient, send-update.
func (t *trainer) train(ctx context.Context) error {
	for i := 0; i < t.steps; i++ {
		p, err := worker.Remote[[]float64](ctx, t.w, "server", "params", 0) // returns at once
		if err != nil {
			return fmt.Errorf("step %d: %w", i, err)
		}
		if err := t.inject(i, p); err != nil {
			return err
		}
		params, err := p.ToHere(ctx) // worker.ErrOwnerFailed when the server is dead
		p.Release()                  // the snapshot is freed once no one holds it
		if err != nil {
			return fmt.Errorf("step %d: fetching the parameters: %w", i, err)
		}
		grad := make([]float64, len(params))
		for j := range params {
			grad[j] = params[j] - target[j]
		}
		time.Sleep(t.compute)
		if _, err := worker.Call[int](ctx, t.w, "server", "update", grad); err != nil {
			return fmt.Errorf("step %d: sending the gradient: %w", i, err) // worker.ErrPeerFailed when the server is dead
		}
	}
	_, err := worker.Call[int](ctx, t.w, "server", "done", t.w.Name())
	return err
}

// inject is where the tutorial's faults happen, at step i while the trainer
// holds the snapshot p: -crash-after kills the process (the server reclaims
// p), and -forget keeps a clone of the first snapshot, never released.
func (t *trainer) inject(i int, p *worker.RRef[[]float64]) error {
	if t.crashAfter > 0 && i == t.crashAfter {
		crash()
	}
	if t.forget && t.cached == nil {
		c, err := p.Clone()
		t.cached = c // the bug: a cache nobody empties
		return err
	}
	return nil
}
