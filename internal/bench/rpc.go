package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/rpc"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rrefkit/rref/runtime/worker"
)

// RPCRow is one RPC system's measurements.
type RPCRow struct {
	System         string             `json:"system"`
	RoundTripNs    float64            `json:"round_trip_ns"`
	Calls1PerSec   float64            `json:"calls_per_second_1_caller"`
	Calls16PerSec  float64            `json:"calls_per_second_16_callers"`
	RemoteToHereNs float64            `json:"remote_to_here_ns,omitempty"`
	Ratios         map[string]float64 `json:"ratios,omitempty"`
	Err            string             `json:"error,omitempty"`
}

// rpcSystem is a client connected to a server that adds two numbers.
type rpcSystem struct {
	name   string
	call   func(ctx context.Context, a, b int64) (int64, error)
	remote func(ctx context.Context) error // Remote + ToHere, when the system has RRefs
	close  func()
}

var quietLog = slog.New(slog.NewTextHandler(io.Discard, nil))

func rrefSystem(name string, peers []worker.Peer) (*rpcSystem, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cfg := worker.Config{Logger: quietLog}
	var server *worker.Worker
	var serr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		server, serr = worker.Start(ctx, "server", peers, []byte("bench"), cfg)
	}()
	client, err := worker.Start(ctx, "client", peers, []byte("bench"), cfg)
	<-done
	if err != nil || serr != nil {
		if client != nil {
			client.Close()
		}
		if server != nil {
			server.Close()
		}
		return nil, fmt.Errorf("%v %v", err, serr)
	}
	return wrapWorkers(name, client, server), nil
}

func registerAdd(w *worker.Worker) {
	worker.Register(w, "add", func(ctx context.Context, x [2]int64) (int64, error) { return x[0] + x[1], nil })
}

// childEnv names the environment variable that makes this program the
// server of a two-process benchmark (see ServeChild).
const childEnv = "RREF_BENCH_RPC_SERVER"

// ServeChild runs the server of a two-process benchmark when this process
// was started as one, until its standard input closes, and reports whether
// it was. Programs that run RPCTable call it first thing in main (or
// TestMain), since the benchmark starts its own executable as the server.
func ServeChild() bool {
	if path := os.Getenv(floorEnv); path != "" {
		serveFloor(path)
		return true
	}
	if spec := os.Getenv(fifoEnv); spec != "" {
		serveFIFO(spec)
		return true
	}
	addr := os.Getenv(childEnv)
	if addr == "" {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	peers := []worker.Peer{{Name: "server", Addr: addr}, {Name: "client", Addr: addr}}
	w, err := worker.Start(ctx, "server", peers, []byte("bench"), worker.Config{Logger: quietLog, Setup: registerAdd})
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench server:", err)
		os.Exit(1)
	}
	io.Copy(io.Discard, os.Stdin)
	w.Close()
	return true
}

// childSystem runs the server in a child process (this executable again).
func childSystem(name, addr string) (*rpcSystem, error) {
	server, err := startChild(childEnv + "=" + addr)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	peers := []worker.Peer{{Name: "server", Addr: addr}, {Name: "client", Addr: addr}}
	client, err := worker.Start(ctx, "client", peers, []byte("bench"), worker.Config{Logger: quietLog})
	if err != nil {
		server.cmd.Process.Kill()
		server.stop()
		return nil, err
	}
	s := wrapClient(name, client)
	s.close = func() {
		client.Close()
		server.stop()
	}
	return s, nil
}

func wrapWorkers(name string, client, server *worker.Worker) *rpcSystem {
	registerAdd(server)
	s := wrapClient(name, client)
	s.close = func() { client.Close(); server.Close() }
	return s
}

func wrapClient(name string, client *worker.Worker) *rpcSystem {
	return &rpcSystem{
		name: name,
		call: func(ctx context.Context, a, b int64) (int64, error) {
			return worker.Call[int64](ctx, client, "server", "add", [2]int64{a, b})
		},
		remote: func(ctx context.Context) error {
			r, err := worker.Remote[int64](ctx, client, "server", "add", [2]int64{1, 2})
			if err != nil {
				return err
			}
			_, err = r.ToHere(ctx)
			r.Release()
			return err
		},
	}
}

func freeAddr() string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "127.0.0.1:0"
	}
	defer ln.Close()
	return ln.Addr().String()
}

// Arith is the net/rpc service.
type Arith struct{}

// Add adds.
func (Arith) Add(args [2]int64, reply *int64) error { *reply = args[0] + args[1]; return nil }

func netRPCSystem() (*rpcSystem, error) {
	srv := rpc.NewServer()
	if err := srv.Register(Arith{}); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	go func() { // srv.Accept would log its error when the listener closes
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go srv.ServeConn(c)
		}
	}()
	c, err := rpc.Dial("tcp", ln.Addr().String())
	if err != nil {
		ln.Close()
		return nil, err
	}
	return &rpcSystem{name: "net/rpc (tcp)",
		call: func(ctx context.Context, a, b int64) (int64, error) {
			var r int64
			err := c.Call("Arith.Add", [2]int64{a, b}, &r)
			return r, err
		},
		close: func() { c.Close(); ln.Close() }}, nil
}

var shmGroup atomic.Int64

// RPCSystems makes every system measured, rrefkit's first.
func RPCSystems() []func() (*rpcSystem, error) {
	return append(rpcSystems(), peerSystems...)
}

func rpcSystems() []func() (*rpcSystem, error) {
	return []func() (*rpcSystem, error){
		func() (*rpcSystem, error) {
			return childSystem("rrefkit (shm, 2 procs)", fmt.Sprintf("shm:rb%d-%d", os.Getpid(), shmGroup.Add(1)))
		},
		func() (*rpcSystem, error) {
			g := fmt.Sprintf("shm:rb%d-%d", os.Getpid(), shmGroup.Add(1))
			return rrefSystem("rrefkit (shm)", []worker.Peer{{Name: "server", Addr: g}, {Name: "client", Addr: g}})
		},
		func() (*rpcSystem, error) {
			return rrefSystem("rrefkit (tcp)", []worker.Peer{{Name: "server", Addr: freeAddr()}, {Name: "client", Addr: freeAddr()}})
		},
		func() (*rpcSystem, error) {
			ws, err := worker.NewGroup([]string{"server", "client"}, worker.Config{Logger: quietLog})
			if err != nil {
				return nil, err
			}
			return wrapWorkers("rrefkit (mem)", ws[1], ws[0]), nil
		},
		netRPCSystem,
	}
}

// peerSystems are the peers built in only on request (grpc_peer.go, build
// tag rrefgrpc): gRPC links 100 packages, most of rrefgen's build time.
var peerSystems []func() (*rpcSystem, error)

// GRPCBuiltIn reports whether this binary measures gRPC-Go.
func GRPCBuiltIn() bool { return len(peerSystems) > 0 }

func measureCalls(s *rpcSystem, callers int, d time.Duration) (float64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d+30*time.Second)
	defer cancel()
	var n atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	start := time.Now()
	for c := 0; c < callers; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			for i := int64(0); time.Since(start) < d; i++ {
				v, err := s.call(ctx, i, int64(c))
				if err == nil && v != i+int64(c) {
					err = fmt.Errorf("%s: wrong sum", s.name)
				}
				if err != nil {
					firstErr.CompareAndSwap(nil, err)
					return
				}
				n.Add(1)
			}
		}(c)
	}
	wg.Wait()
	if err, _ := firstErr.Load().(error); err != nil {
		return 0, err
	}
	return float64(n.Load()) / time.Since(start).Seconds(), nil
}

// RPCTable measures each system for about d per cell.
func RPCTable(d time.Duration, progress func(string)) []RPCRow {
	var rows []RPCRow
	for _, mk := range RPCSystems() {
		s, err := mk()
		if err != nil {
			rows = append(rows, RPCRow{System: "?", Err: err.Error()})
			continue
		}
		r := RPCRow{System: s.name}
		// Unmeasured calls first: a new process, connection or worker runs
		// slower for its first hundreds of milliseconds (page faults on
		// the rings, the collector sizing its heap, the scheduler finding
		// its threads), which a short cell would otherwise mostly measure.
		progress(s.name + ": warming up")
		if _, err := measureCalls(s, 1, d); err != nil {
			rows = append(rows, RPCRow{System: s.name, Err: err.Error()})
			s.close()
			continue
		}
		progress(s.name + ": 1 caller")
		if rate, err := measureCalls(s, 1, d); err != nil {
			r.Err = err.Error()
		} else {
			r.Calls1PerSec, r.RoundTripNs = rate, 1e9/rate
		}
		progress(s.name + ": 16 callers")
		if rate, err := measureCalls(s, 16, d); err != nil {
			r.Err = err.Error()
		} else {
			r.Calls16PerSec = rate
		}
		if s.remote != nil {
			progress(s.name + ": remote + to_here")
			ctx, cancel := context.WithTimeout(context.Background(), d+30*time.Second)
			n, start := 0, time.Now()
			for time.Since(start) < d {
				if err := s.remote(ctx); err != nil {
					r.Err = err.Error()
					break
				}
				n++
			}
			cancel()
			if n > 0 {
				r.RemoteToHereNs = float64(time.Since(start).Nanoseconds()) / float64(n)
			}
		}
		s.close()
		rows = append(rows, r)
	}
	var grpcRT float64
	for _, r := range rows {
		if r.System == "gRPC-Go unary (tcp)" {
			grpcRT = r.RoundTripNs
		}
	}
	for i := range rows {
		if grpcRT > 0 && rows[i].RoundTripNs > 0 {
			rows[i].Ratios = map[string]float64{"grpc_round_trip_over_this": grpcRT / rows[i].RoundTripNs}
		}
	}
	return rows
}

// WriteRPC prints rows as text, csv or json.
func WriteRPC(w io.Writer, rows []RPCRow, format string) error {
	h := []string{"system", "round trip us", "calls/s 1 caller", "calls/s 16 callers", "remote+to_here us", "gRPC rt / rt"}
	var table [][]string
	for _, r := range rows {
		f := func(v, scale float64, prec int) string {
			if v == 0 {
				return "-"
			}
			return fmt.Sprintf("%.*f", prec, v/scale)
		}
		ratio := "-"
		if v, ok := r.Ratios["grpc_round_trip_over_this"]; ok {
			ratio = fmt.Sprintf("%.2fx", v)
		}
		table = append(table, []string{r.System, f(r.RoundTripNs, 1e3, 2), f(r.Calls1PerSec, 1, 0), f(r.Calls16PerSec, 1, 0), f(r.RemoteToHereNs, 1e3, 2), ratio})
	}
	return writeTable(w, h, table, format, rows, func() {
		for _, r := range rows {
			if r.Err != "" {
				fmt.Fprintf(w, "%s: %s\n", r.System, r.Err)
			}
		}
		fmt.Fprintln(w, "\nround trip: one caller, sequential calls; gRPC rt / rt above 1 means faster than gRPC-Go unary.")
		if !GRPCBuiltIn() {
			fmt.Fprintln(w, "gRPC-Go is not built into this rrefgen: go run -tags rrefgrpc ./cmd/rrefgen bench rpc measures it too.")
		}
		fmt.Fprintln(w, "All systems ran in this run, on loopback or shared memory; \"2 procs\" runs the server in a second process,")
		fmt.Fprintln(w, "as shared memory is meant to be used; every other row runs client and server in this process.")
		fmt.Fprintln(w, "In one process shm trails mem: a receiver parked on a futex keeps its processor until the Go")
		fmt.Fprintln(w, "runtime takes it back, and the other worker waits for it; mem is the transport within a process.")
	})
}
