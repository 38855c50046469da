package main

import (
	"context"
	"fmt"
	"os"
	"sync"
	"syscall"

	"github.com/rrefkit/rref/runtime/worker"
)

var target = []float64{1, -2, 3, 0.5}

const learningRate = 0.2

// server owns the parameters.
type server struct {
	mu         sync.Mutex
	w          []float64
	updates    int
	snapshots  int
	crashAfter int // with -crash-after: the snapshots the server makes before it kills itself
	finished   chan string
	failed     chan failure
}

// failure is a peer the server found dead, and why.
type failure struct {
	peer string
	err  error
}

// newServer makes a server for a group of members (itself included): each
// other member finishes or fails once, so neither channel ever fills.
func newServer(members, crashAfter int) *server {
	return &server{
		w:          make([]float64, len(target)),
		crashAfter: crashAfter,
		finished:   make(chan string, members),
		failed:     make(chan failure, members),
	}
}

func (s *server) register(w *worker.Worker) {
	// params makes a snapshot of the parameters. Trainers call it with
	// worker.Remote: the snapshot stays here, owned by the server, and a
	// trainer holds only a reference to it until it fetches it; it is freed
	// once every reference to it is released.
	worker.Register(w, "params", func(ctx context.Context, _ int) ([]float64, error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.inject() // the tutorial's fault, when asked for
		return append([]float64(nil), s.w...), nil
	})
	worker.Register(w, "update", func(ctx context.Context, grad []float64) (int, error) {
		if len(grad) != len(target) {
			return 0, fmt.Errorf("gradient of %d values, want %d", len(grad), len(target))
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		for i := range s.w {
			s.w[i] -= learningRate * grad[i]
		}
		s.updates++
		return s.updates, nil
	})
	worker.Register(w, "done", func(ctx context.Context, name string) (int, error) {
		s.finished <- name
		return 0, nil
	})
}

// peerFailed is the server's Config.OnPeerFailed. By the time it runs, the
// dead trainer's references have been reclaimed (the snapshots it held are
// freed); a dead trainer will never say done, so the server stops waiting
// for it. It must not block: the channel has room for every member.
func (s *server) peerFailed(peer string, err error) {
	s.failed <- failure{peer, err}
}

func (s *server) loss() float64 {
	_, l := s.progress()
	return l
}

// progress is how many updates the server took and the loss they left.
func (s *server) progress() (updates int, loss float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := 0.0
	for i := range s.w {
		d := s.w[i] - target[i]
		l += d * d
	}
	return s.updates, l
}

// inject is where the tutorial's fault happens on the server: with
// -crash-after N, the process dies making snapshot N+1, and the trainer
// that asked for it finds its ToHere failing with ErrOwnerFailed.
func (s *server) inject() {
	s.snapshots++
	if s.crashAfter > 0 && s.snapshots > s.crashAfter {
		crash()
	}
}

// crash kills this process as a fault would: no deferred function runs,
// no worker closes, no message says goodbye.
func crash() {
	syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {} // the signal is on its way
}
