// Command paramserver is a small parameter server on rrefkit: one server owns
// the model's parameters; trainers in other processes (or on other hosts)
// fetch a snapshot through an RRef the server hands out, compute a gradient
// and send it back. The model fits w to a fixed target.
//
// In one process:
//
//	go run ./examples/paramserver -local
//
// Across processes on one host (tcp; use shm:NAME addresses for shared memory):
//
//	PEERS=server=127.0.0.1:7100,t1=127.0.0.1:7101,t2=127.0.0.1:7102
//	go run ./examples/paramserver -name server -peers $PEERS &
//	go run ./examples/paramserver -name t1 -peers $PEERS &
//	go run ./examples/paramserver -name t2 -peers $PEERS
//
// Over libfabric (RDMA fabrics, or its software providers), in a build with
// the fabric provider, give fabric:host:port addresses:
//
//	go build -tags rreffabric -o paramserver ./examples/paramserver
//	PEERS=server=fabric:127.0.0.1:7100,t1=fabric:127.0.0.1:7101,t2=fabric:127.0.0.1:7102
//
// and fabric:PROVIDER@host:port to name libfabric's provider (on
// InfiniBand, fabric:verbs;ofi_rxm@host:port; quote the list in a shell).
//
// Across hosts, give each member its own host's address in -peers, the same
// list everywhere, and the same -secret.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/rrefkit/rref/runtime/worker"
)

var target = []float64{1, -2, 3, 0.5}

const learningRate = 0.2

// server owns the parameters.
type server struct {
	mu       sync.Mutex
	w        []float64
	updates  int
	finished chan string
}

func (s *server) register(w *worker.Worker) {
	// params hands out an RRef to a snapshot the server owns: trainers fetch
	// it when they need it, and it is freed once every trainer released it.
	worker.Register(w, "params", func(ctx context.Context, _ int) (*worker.RRef[[]float64], error) {
		s.mu.Lock()
		snap := append([]float64(nil), s.w...)
		s.mu.Unlock()
		return worker.NewRRef(w, snap)
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

func (s *server) loss() float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := 0.0
	for i := range s.w {
		d := s.w[i] - target[i]
		l += d * d
	}
	return l
}

// train runs steps of fetch-params, compute-gradient, send-update.
func train(ctx context.Context, w *worker.Worker, steps int) error {
	for i := 0; i < steps; i++ {
		p, err := worker.Call[*worker.RRef[[]float64]](ctx, w, "server", "params", 0)
		if err != nil {
			return err
		}
		params, err := p.ToHere(ctx)
		p.Release()
		if err != nil {
			return err
		}
		grad := make([]float64, len(params))
		for j := range params {
			grad[j] = params[j] - target[j]
		}
		if _, err := worker.Call[int](ctx, w, "server", "update", grad); err != nil {
			return err
		}
	}
	_, err := worker.Call[int](ctx, w, "server", "done", w.Name())
	return err
}

func shutdown(w *worker.Worker) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return w.Shutdown(ctx)
}

// runLocal runs a server and trainers in this process.
func runLocal(out io.Writer, trainers, steps int) error {
	names := []string{"server"}
	for i := 1; i <= trainers; i++ {
		names = append(names, fmt.Sprintf("t%d", i))
	}
	ws, err := worker.NewGroup(names, worker.Config{})
	if err != nil {
		return err
	}
	s := &server{w: make([]float64, len(target)), finished: make(chan string, trainers)}
	s.register(ws[0])
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	fmt.Fprintf(out, "loss before: %.4f\n", s.loss())
	errs := make(chan error, trainers)
	for _, w := range ws[1:] {
		go func(w *worker.Worker) { errs <- train(ctx, w, steps) }(w)
	}
	for range ws[1:] {
		if err := <-errs; err != nil {
			return err
		}
	}
	fmt.Fprintf(out, "loss after %d updates: %.6f\n", s.updates, s.loss())
	sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer scancel()
	if err := worker.ShutdownGroup(sctx, ws); err != nil { // a barrier: all together
		return err
	}
	fmt.Fprintln(out, "all workers shut down; no parameter snapshot leaked")
	return nil
}

func parsePeers(s string) ([]worker.Peer, error) {
	var peers []worker.Peer
	for _, part := range strings.Split(s, ",") {
		name, addr, ok := strings.Cut(part, "=")
		if !ok || name == "" || addr == "" {
			return nil, fmt.Errorf("bad -peers entry %q (want name=host:port, name=shm:GROUP or name=fabric:[PROVIDER@]host:port)", part)
		}
		peers = append(peers, worker.Peer{Name: name, Addr: addr})
	}
	return peers, nil
}

func main() {
	local := flag.Bool("local", false, "run the server and trainers in this process")
	name := flag.String("name", "", "this member's name in -peers (\"server\" serves)")
	peersFlag := flag.String("peers", "", "every member as name=host:port, name=shm:GROUP or name=fabric:[PROVIDER@]host:port, comma-separated, the same list everywhere")
	secret := flag.String("secret", "paramserver", "shared secret of the group")
	trainers := flag.Int("trainers", 2, "trainers (with -local)")
	steps := flag.Int("steps", 25, "updates per trainer")
	flag.Parse()
	if *local || *peersFlag == "" {
		if err := runLocal(os.Stdout, *trainers, *steps); err != nil {
			log.Fatal(err)
		}
		return
	}
	peers, err := parsePeers(*peersFlag)
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s := &server{w: make([]float64, len(target)), finished: make(chan string, len(peers))}
	cfg := worker.Config{}
	if *name == "server" {
		cfg.Setup = s.register // before any trainer can connect and call
	}
	// Start waits for every member (up to two minutes): say so, or a member
	// started first, or given a wrong address, would sit there silently.
	log.Printf("%s: waiting for the group (%s) to come up", *name, *peersFlag)
	w, err := worker.Start(ctx, *name, peers, []byte(*secret), cfg)
	if err != nil {
		log.Fatal(err)
	}
	if *name != "server" {
		if err := train(ctx, w, *steps); err != nil {
			log.Fatal(err)
		}
		if err := shutdown(w); err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s: trained %d steps\n", *name, *steps)
		return
	}
	fmt.Printf("server: loss %.4f, waiting for %d trainers\n", s.loss(), len(peers)-1)
	for i := 1; i < len(peers); i++ {
		select {
		case t := <-s.finished:
			fmt.Printf("server: %s finished\n", t)
		case <-ctx.Done():
			log.Fatal("trainers did not finish in time")
		}
	}
	fmt.Printf("server: loss after %d updates: %.6f\n", s.updates, s.loss())
	if err := shutdown(w); err != nil {
		log.Fatal(err)
	}
}
