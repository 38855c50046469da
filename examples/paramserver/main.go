// Command paramserver is a small parameter server on rrefkit: one server owns
// the model's parameters; trainers in other processes (or on other hosts)
// fetch a snapshot through an RRef the server hands out, compute a gradient
// and send it back. The model fits w to a fixed target.
// docs/runtime-tutorial.md walks through it, from one process to three,
// through failures, leak reports and the observability listener.
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
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/rrefkit/rref/runtime/observe"
	"github.com/rrefkit/rref/runtime/worker"
)

// startTimeout bounds how long a member waits for the whole group to come
// up: long enough to start the other members by hand.
const startTimeout = 2 * time.Minute

// options are the example's flags.
type options struct {
	local           bool
	name            string
	peers           string
	secret          string
	trainers        int
	steps           int
	compute         time.Duration
	crashAfter      int
	forget          bool
	observe         string
	sites           bool
	deadAfter       time.Duration
	shutdownTimeout time.Duration
}

func newFlags(o *options) *flag.FlagSet {
	fs := flag.NewFlagSet("paramserver", flag.ContinueOnError)
	fs.BoolVar(&o.local, "local", false, "run the server and trainers in this process")
	fs.StringVar(&o.name, "name", "", "this member's name in -peers (\"server\" serves)")
	fs.StringVar(&o.peers, "peers", "", "every member as name=host:port, name=shm:GROUP or name=fabric:[PROVIDER@]host:port, comma-separated, the same list everywhere")
	fs.StringVar(&o.secret, "secret", "paramserver", "shared secret of the group")
	fs.IntVar(&o.trainers, "trainers", 2, "trainers (with -local)")
	fs.IntVar(&o.steps, "steps", 25, "updates per trainer")
	fs.DurationVar(&o.compute, "compute", 0, "time a trainer takes to compute each gradient")
	fs.IntVar(&o.crashAfter, "crash-after", 0, "kill this member (SIGKILL) after that many steps (a trainer) or snapshots (the server)")
	fs.BoolVar(&o.forget, "forget", false, "a trainer (t1 with -local) keeps its first snapshot and never releases it")
	fs.StringVar(&o.observe, "observe", "", "serve metrics, counters and pprof for this member (the server with -local) on this address")
	fs.BoolVar(&o.sites, "sites", false, "record where each reference was made (Config.RecordRefSites), for -observe's views of references")
	fs.DurationVar(&o.deadAfter, "dead-after", 0, "how long a silent peer lives on before it is dead (0: the transport's default, 10s)")
	fs.DurationVar(&o.shutdownTimeout, "shutdown-timeout", 10*time.Second, "how long Shutdown waits for every reference to be released")
	return fs
}

// check refuses flags that cannot go together.
func (o options) check() error {
	switch {
	case o.local && o.peers != "":
		return errors.New("-local runs every member here: give it no -peers")
	case o.peers != "" && o.name == "":
		return errors.New("-peers needs -name, this member's name in the list")
	case (o.local || o.peers == "") && o.crashAfter > 0:
		return errors.New("-crash-after kills its process: give it to one member of a group started with -peers")
	case o.steps < 1 || o.trainers < 1:
		return errors.New("-steps and -trainers must be at least 1")
	}
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
	var o options
	fs := newFlags(&o)
	if err := fs.Parse(os.Args[1:]); err != nil {
		os.Exit(2)
	}
	if err := o.check(); err != nil {
		fmt.Fprintln(os.Stderr, "paramserver:", err)
		os.Exit(2)
	}
	log.SetFlags(0)
	log.SetPrefix("paramserver: ")
	if o.name != "" {
		log.SetPrefix(o.name + ": ")
	}
	var err error
	if o.local || o.peers == "" {
		err = runLocal(os.Stdout, o)
	} else {
		err = runMember(os.Stdout, o)
	}
	if err != nil {
		log.Fatal(err)
	}
}

// runMember runs this process's member of a group spread over processes.
func runMember(out io.Writer, o options) error {
	peers, err := parsePeers(o.peers)
	if err != nil {
		return err
	}
	s := newServer(len(peers), o.crashAfter)
	cfg := worker.Config{RecordRefSites: o.sites}
	cfg.FIFO.DeadAfter = o.deadAfter
	if o.name == "server" {
		cfg.Setup = s.register // before any trainer can connect and call
		cfg.OnPeerFailed = s.peerFailed
	}
	// Start waits for every member: say so, or a member started first, or
	// given a wrong address, would sit there silently.
	log.Printf("waiting for the group (%s) to come up", o.peers)
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	w, err := worker.Start(ctx, o.name, peers, []byte(o.secret), cfg)
	if err != nil {
		return err
	}
	if o.observe != "" {
		addr, err := observe.Serve(context.Background(), w, o.observe) // until w closes
		if err != nil {
			w.Close()
			return err
		}
		fmt.Fprintf(out, "%s: metrics on http://%s/metrics, counters on http://%s/debug/rref\n", o.name, addr, addr)
	}
	if o.name == "server" {
		return serve(out, w, s, len(peers)-1, o.shutdownTimeout)
	}
	t := &trainer{w: w, steps: o.steps, compute: o.compute, crashAfter: o.crashAfter, forget: o.forget}
	trainErr := t.train(context.Background())
	switch {
	case errors.Is(trainErr, worker.ErrOwnerFailed):
		fmt.Fprintf(out, "%s: the server died; the snapshot it owned is gone\n", o.name)
	case errors.Is(trainErr, worker.ErrPeerFailed):
		fmt.Fprintf(out, "%s: the server died before it answered\n", o.name)
	}
	err = shutdown(w, o.shutdownTimeout) // with the members still alive
	runtime.KeepAlive(t)                 // with -forget, t.cached is still held
	if trainErr != nil {
		return trainErr
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "%s: trained %d steps\n", o.name, o.steps)
	return nil
}

// serve waits for each trainer to finish or fail, then shuts down.
func serve(out io.Writer, w *worker.Worker, s *server, trainers int, timeout time.Duration) error {
	fmt.Fprintf(out, "server: loss %.4f, waiting for %d trainers\n", s.loss(), trainers)
	for left := trainers; left > 0; left-- {
		select {
		case t := <-s.finished:
			fmt.Fprintf(out, "server: %s finished\n", t)
		case f := <-s.failed:
			fmt.Fprintf(out, "server: %s failed: %v\n", f.peer, f.err)
		}
	}
	updates, loss := s.progress()
	fmt.Fprintf(out, "server: loss after %d updates: %.6f\n", updates, loss)
	if err := shutdown(w, timeout); err != nil {
		return err
	}
	fmt.Fprintln(out, "server: shut down; no parameter snapshot leaked")
	return nil
}

// shutdown is the group's barrier: it returns once no member holds a
// reference or has a message in flight, or, past timeout, a
// *worker.LeakError naming what is still held.
func shutdown(w *worker.Worker, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return w.Shutdown(ctx)
}
