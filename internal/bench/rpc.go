package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/rpc"
	"os"
	"runtime"
	"runtime/pprof"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rrefkit/rref/internal/freeport"
	"github.com/rrefkit/rref/internal/hooks"
	"github.com/rrefkit/rref/runtime/worker"
)

// RPCRow is one RPC system's measurements.
type RPCRow struct {
	System         string  `json:"system"`
	RoundTripNs    float64 `json:"round_trip_ns"`
	Calls1PerSec   float64 `json:"calls_per_second_1_caller"`
	Calls16PerSec  float64 `json:"calls_per_second_16_callers"`
	RemoteToHereNs float64 `json:"remote_to_here_ns,omitempty"`
	// RemoteToHereSitesNs is Remote plus ToHere with the client recording
	// reference sites (worker.Config.RecordRefSites), measured in turns
	// with RemoteToHereNs over the same connection.
	RemoteToHereSitesNs float64 `json:"remote_to_here_sites_ns,omitempty"`
	// Processor time per call, of this process and the server's when it
	// runs apart, in the 1-caller and 16-caller cells (see cpu.go).
	CPU1Ns  float64 `json:"cpu_ns_per_call_1_caller,omitempty"`
	CPU16Ns float64 `json:"cpu_ns_per_call_16_callers,omitempty"`
	// The yardsticks, measured just before the row: a fifo/shm round trip
	// (shm rows) or a raw Go TCP ping-pong (tcp rows) of yardstickSize bytes.
	YardstickNs float64            `json:"yardstick_round_trip_ns,omitempty"`
	Yardstick   string             `json:"yardstick,omitempty"`
	Ratios      map[string]float64 `json:"ratios,omitempty"`
	Err         string             `json:"error,omitempty"`
}

// rpcSystem is a client connected to a server that adds two numbers.
type rpcSystem struct {
	name   string
	call   func(ctx context.Context, a, b int64) (int64, error)
	remote func(ctx context.Context) error // Remote + ToHere, when the system has RRefs
	sites  func(on bool)                   // switches the client's recording of reference sites
	close  func()
	pids   []int // the system's processes besides this one (its server's)
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

// ServerProfileEnv names the file the server of a two-process benchmark
// writes its CPU profile to (rrefgen bench rpc -cpuprofile).
const ServerProfileEnv = "RREF_BENCH_SERVER_CPUPROFILE"

// StartCPUProfile profiles this process's CPU into path until stop.
func StartCPUProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}

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
	if path := os.Getenv(ServerProfileEnv); path != "" {
		if stop, err := StartCPUProfile(path); err == nil {
			defer stop()
		} else {
			fmt.Fprintln(os.Stderr, "bench server:", err)
		}
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

// serverEnv is an extra variable for the server's process, set by the
// table being measured (one at a time).
var serverEnv string

// childSystem runs the server in a child process (this executable again).
func childSystem(name, addr string) (*rpcSystem, error) {
	env := []string{childEnv + "=" + addr}
	if serverEnv != "" {
		env = append(env, serverEnv)
	}
	server, err := startChild(env...)
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
	s.pids = []int{server.cmd.Process.Pid}
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
		sites: func(on bool) { hooks.WorkerRecordSites(client, on) },
	}
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

// systemMaker makes one system measured, named before it is made so that
// a table narrowed to some systems starts no other.
type systemMaker struct {
	name string
	make func() (*rpcSystem, error)
}

// RPCSystems makes every system measured, rrefkit's first.
func RPCSystems() []systemMaker {
	return append(rpcSystems(), peerSystems...)
}

func rpcSystems() []systemMaker {
	return []systemMaker{
		{"rrefkit (shm, 2 procs)", func() (*rpcSystem, error) {
			return childSystem("rrefkit (shm, 2 procs)", fmt.Sprintf("shm:rb%d-%d", os.Getpid(), shmGroup.Add(1)))
		}},
		{"rrefkit (shm)", func() (*rpcSystem, error) {
			g := fmt.Sprintf("shm:rb%d-%d", os.Getpid(), shmGroup.Add(1))
			return rrefSystem("rrefkit (shm)", []worker.Peer{{Name: "server", Addr: g}, {Name: "client", Addr: g}})
		}},
		{"rrefkit (tcp)", func() (*rpcSystem, error) {
			addrs, err := freeport.Loopback(2)
			if err != nil {
				return nil, err
			}
			return rrefSystem("rrefkit (tcp)", []worker.Peer{{Name: "server", Addr: addrs[0]}, {Name: "client", Addr: addrs[1]}})
		}},
		{"rrefkit (mem)", func() (*rpcSystem, error) {
			ws, err := worker.NewGroup([]string{"server", "client"}, worker.Config{Logger: quietLog})
			if err != nil {
				return nil, err
			}
			return wrapWorkers("rrefkit (mem)", ws[1], ws[0]), nil
		}},
		{"net/rpc (tcp)", netRPCSystem},
	}
}

// peerSystems are the peers built in only on request (grpc_peer.go, build
// tag rrefgrpc): gRPC links 100 packages, most of rrefgen's build time.
var peerSystems []systemMaker

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

// measureCallsCPU is measureCalls, with the processor time per call of
// the system's processes (0 where it cannot be read).
func measureCallsCPU(s *rpcSystem, callers int, d time.Duration) (rate, cpuNs float64, err error) {
	before, cerr := cpuOf(s)
	start := time.Now()
	rate, err = measureCalls(s, callers, d)
	elapsed := time.Since(start)
	after, cerr2 := cpuOf(s)
	if err != nil || cerr != nil || cerr2 != nil || rate <= 0 {
		return rate, 0, err
	}
	return rate, float64(after-before) / (rate * elapsed.Seconds()), nil
}

// RPCTable measures each system for about d per cell.
func RPCTable(d time.Duration, progress func(string)) []RPCRow {
	return RPCTableOf(d, progress, RPCOptions{})
}

// RPCOptions narrows and instruments a table.
type RPCOptions struct {
	Only func(system string) bool // measure only the systems it accepts (nil: all)
	// ServerCPUProfile is where the server of a two-process system writes
	// its CPU profile ("": none).
	ServerCPUProfile string
	// Cells are the cells to measure, of RPCCells (nil: all). A profile of
	// one cell says where that cell's time goes, unmixed with the others.
	Cells map[string]bool
}

// RPCCells name a row's measured cells, for RPCOptions.Cells: the one
// caller's round trip, 16 callers' throughput, and Remote plus ToHere.
var RPCCells = []string{"1", "16", "remote"}

func (o RPCOptions) measures(cell string) bool { return o.Cells == nil || o.Cells[cell] }

// RPCTableOf measures the systems opt accepts.
func RPCTableOf(d time.Duration, progress func(string), opt RPCOptions) []RPCRow {
	var rows []RPCRow
	serverEnv = ""
	if opt.ServerCPUProfile != "" {
		serverEnv = ServerProfileEnv + "=" + opt.ServerCPUProfile
	}
	for _, mk := range RPCSystems() {
		if opt.Only != nil && !opt.Only(mk.name) {
			continue
		}
		s, err := mk.make()
		if err != nil {
			rows = append(rows, RPCRow{System: mk.name, Err: err.Error()})
			continue
		}
		r := RPCRow{System: s.name}
		if t, ok := yardstickFor(s.name); ok {
			progress(s.name + ": " + t.Name + " round trip beside it")
			if oneWay, err := PingPong(t, yardstickSize, d); err == nil {
				r.Yardstick, r.YardstickNs = t.Name, 2*float64(oneWay.Nanoseconds())
			}
		}
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
		if opt.measures("1") {
			progress(s.name + ": 1 caller")
			if rate, cpu, err := measureCallsCPU(s, 1, d); err != nil {
				r.Err = err.Error()
			} else {
				r.Calls1PerSec, r.RoundTripNs, r.CPU1Ns = rate, 1e9/rate, cpu
			}
		}
		if opt.measures("16") {
			progress(s.name + ": 16 callers")
			if rate, cpu, err := measureCallsCPU(s, 16, d); err != nil {
				r.Err = err.Error()
			} else {
				r.Calls16PerSec, r.CPU16Ns = rate, cpu
			}
		}
		if s.remote != nil && opt.measures("remote") {
			progress(s.name + ": remote + to_here, sites off and on")
			off, on, err := measureRemote(s, d)
			if err != nil {
				r.Err = err.Error()
			}
			r.RemoteToHereNs, r.RemoteToHereSitesNs = off, on
		}
		s.close()
		rows = append(rows, r)
	}
	addRatios(rows)
	return rows
}

// siteTurns is how many times the remote cell switches reference sites
// off and on: each mode's time is spread over the cell, so a slow spell
// of the host falls on both.
const siteTurns = 40

// measureRemote measures Remote + ToHere for about d, in turns with the
// client's reference sites off and on (off only, for a system that cannot
// switch them), and returns each mode's time per operation.
func measureRemote(s *rpcSystem, d time.Duration) (offNs, onNs float64, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), d+30*time.Second)
	defer cancel()
	modes := []bool{false}
	if s.sites != nil {
		modes = append(modes, true)
		defer s.sites(false)
	}
	var ns [2]float64
	var n [2]int
	slice := d / time.Duration(siteTurns*len(modes))
	for turn := 0; turn < siteTurns; turn++ {
		for _, on := range modes {
			i := 0
			if on {
				i = 1
			}
			if s.sites != nil {
				s.sites(on)
			}
			start := time.Now()
			for time.Since(start) < slice || n[i] == 0 {
				if err := s.remote(ctx); err != nil {
					return 0, 0, err
				}
				n[i]++
			}
			ns[i] += float64(time.Since(start).Nanoseconds())
		}
	}
	for i := range ns {
		if n[i] > 0 {
			ns[i] /= float64(n[i])
		}
	}
	return ns[0], ns[1], nil
}

// yardstickSize is the size of the yardsticks' messages: about a call of
// add(a, b) on the wire (its frame is 40-odd bytes), rounded to a cell.
const yardstickSize = 64

// yardstickFor is the transport a system's round trip is held against:
// the fifo over shared memory for rrefkit's shm rows, a raw Go TCP
// ping-pong for every tcp row.
func yardstickFor(system string) (Transport, bool) {
	want := "tcp loopback"
	switch {
	case strings.Contains(system, "(shm"):
		want = "fifo/shm"
	case strings.Contains(system, "(mem)"):
		return Transport{}, false
	}
	for _, t := range Transports() {
		if t.Name == want {
			return t, true
		}
	}
	return Transport{}, false
}

// Targets are the speed targets the table's ratios are held against (the
// project's issue on call speed): each names a ratio and its bound.
var Targets = []struct {
	Ratio, Says string
	Max         bool // the ratio must be at most Bound (else at least)
	Bound       float64
}{
	{"yardstick_round_trip", "rrefkit shm (2 procs) round trip / fifo/shm round trip", true, 5},
	{"grpc_round_trip_over_this", "gRPC-Go round trip / rrefkit shm (2 procs) round trip", false, 100},
	{"tcp_yardstick_round_trip", "rrefkit tcp round trip / raw TCP ping-pong", true, 1.2},
	{"calls16_over_netrpc", "rrefkit tcp calls/s with 16 callers / net/rpc's", false, 3},
	{"calls16_over_calls1", "rrefkit shm (2 procs) calls/s with 16 callers / with 1", false, 2},
	{"remote_to_here_over_round_trip", "Remote + ToHere / Call round trip (worst transport)", true, 2},
	{"sites_over_remote_to_here", "Remote + ToHere, reference sites on / off (worst transport)", true, 1.1},
}

// addRatios fills each row's ratios against its yardstick and its peers
// measured in the same run.
func addRatios(rows []RPCRow) {
	find := func(name string) *RPCRow {
		for i := range rows {
			if rows[i].System == name && rows[i].Err == "" {
				return &rows[i]
			}
		}
		return nil
	}
	grpc, netrpc := find("gRPC-Go unary (tcp)"), find("net/rpc (tcp)")
	for i := range rows {
		r := &rows[i]
		if r.RemoteToHereNs > 0 && r.RemoteToHereSitesNs > 0 {
			// Both measured in the remote cell, against each other: no
			// round trip needed.
			r.Ratios = map[string]float64{"sites_over_remote_to_here": r.RemoteToHereSitesNs / r.RemoteToHereNs}
		}
		if r.RoundTripNs <= 0 {
			continue
		}
		if r.Ratios == nil {
			r.Ratios = map[string]float64{}
		}
		if grpc != nil && grpc.RoundTripNs > 0 {
			r.Ratios["grpc_round_trip_over_this"] = grpc.RoundTripNs / r.RoundTripNs
		}
		if r.YardstickNs > 0 {
			key := "yardstick_round_trip"
			if r.Yardstick == "tcp loopback" {
				key = "tcp_yardstick_round_trip"
			}
			r.Ratios[key] = r.RoundTripNs / r.YardstickNs
		}
		if netrpc != nil && netrpc.Calls16PerSec > 0 && r.Calls16PerSec > 0 {
			r.Ratios["calls16_over_netrpc"] = r.Calls16PerSec / netrpc.Calls16PerSec
		}
		if r.Calls16PerSec > 0 {
			r.Ratios["calls16_over_calls1"] = r.Calls16PerSec / r.Calls1PerSec
		}
		if r.RemoteToHereNs > 0 {
			r.Ratios["remote_to_here_over_round_trip"] = r.RemoteToHereNs / r.RoundTripNs
		}
	}
}

// targetRows are the rows each target reads its ratio from.
var targetRows = map[string][]string{
	"yardstick_round_trip":      {"rrefkit (shm, 2 procs)"},
	"grpc_round_trip_over_this": {"rrefkit (shm, 2 procs)"},
	"tcp_yardstick_round_trip":  {"rrefkit (tcp)"},
	"calls16_over_netrpc":       {"rrefkit (tcp)"},
	"calls16_over_calls1":       {"rrefkit (shm, 2 procs)"},
	// Every transport, mem included: the target holds on each.
	"remote_to_here_over_round_trip": {"rrefkit (shm, 2 procs)", "rrefkit (tcp)", "rrefkit (mem)"},
	"sites_over_remote_to_here":      {"rrefkit (shm, 2 procs)", "rrefkit (shm)", "rrefkit (tcp)", "rrefkit (mem)"},
}

// writeTargets prints each target with the ratio measured in this run.
func writeTargets(w io.Writer, rows []RPCRow) {
	fmt.Fprintln(w, "\ntargets (ratios in this run):")
	for _, t := range Targets {
		worst, have := 0.0, false
		for _, name := range targetRows[t.Ratio] {
			for _, r := range rows {
				v, ok := r.Ratios[t.Ratio]
				if r.System != name || !ok {
					continue
				}
				if !have || t.Max && v > worst || !t.Max && v < worst {
					worst, have = v, true
				}
			}
		}
		if !have {
			fmt.Fprintf(w, "  %-62s not measured\n", t.Says)
			continue
		}
		op, met := ">=", worst >= t.Bound
		if t.Max {
			op, met = "<=", worst <= t.Bound
		}
		verdict := "met"
		if !met {
			verdict = "NOT met"
		}
		fmt.Fprintf(w, "  %-62s %8.2f  (target %s %g: %s)\n", t.Says, worst, op, t.Bound, verdict)
	}
}

// WriteRPC prints rows as text, csv or json.
func WriteRPC(w io.Writer, rows []RPCRow, format string) error {
	h := []string{"system", "round trip us", "yardstick rt us", "rt / yardstick", "calls/s 1 caller", "calls/s 16 callers", "cpu us/call 1", "cpu us/call 16", "remote+to_here us", "sites on / off", "gRPC rt / rt"}
	var table [][]string
	for _, r := range rows {
		f := func(v, scale float64, prec int) string {
			if v == 0 {
				return "-"
			}
			return fmt.Sprintf("%.*f", prec, v/scale)
		}
		ratio := func(keys ...string) string {
			for _, k := range keys {
				if v, ok := r.Ratios[k]; ok {
					return fmt.Sprintf("%.2fx", v)
				}
			}
			return "-"
		}
		table = append(table, []string{r.System, f(r.RoundTripNs, 1e3, 2), f(r.YardstickNs, 1e3, 2),
			ratio("yardstick_round_trip", "tcp_yardstick_round_trip"), f(r.Calls1PerSec, 1, 0), f(r.Calls16PerSec, 1, 0),
			f(r.CPU1Ns, 1e3, 2), f(r.CPU16Ns, 1e3, 2), f(r.RemoteToHereNs, 1e3, 2), ratio("sites_over_remote_to_here"), ratio("grpc_round_trip_over_this")})
	}
	return writeTable(w, h, table, format, rows, func() {
		for _, r := range rows {
			if r.Err != "" {
				fmt.Fprintf(w, "%s: %s\n", r.System, r.Err)
			}
		}
		fmt.Fprintln(w, "\nround trip: one caller, sequential calls; gRPC rt / rt above 1 means faster than gRPC-Go unary.")
		fmt.Fprintf(w, "cpu us/call: processor time of client and server, both processes for \"2 procs\", per call; with %d processors\n", runtime.NumCPU())
		fmt.Fprintln(w, "shared by both ends, no batching makes more calls a second than processors / (cpu per call).")
		fmt.Fprintln(w, "sites on / off: Remote + ToHere with the client recording reference sites (worker.Config.RecordRefSites) over")
		fmt.Fprintf(w, "without, in %d turns each over the same connection.\n", siteTurns)
		fmt.Fprintf(w, "yardstick: a %d-byte round trip measured just before the row, fifo/shm for shm rows, a raw Go TCP ping-pong for tcp rows.\n", yardstickSize)
		if !GRPCBuiltIn() {
			fmt.Fprintln(w, "gRPC-Go is not built into this rrefgen: go run -tags rrefgrpc ./cmd/rrefgen bench rpc measures it too.")
		}
		fmt.Fprintln(w, "All systems ran in this run, on loopback or shared memory; \"2 procs\" runs the server in a second process,")
		fmt.Fprintln(w, "as shared memory is meant to be used; every other row runs client and server in this process.")
		fmt.Fprintln(w, "In one process shm trails mem: a receiver parked on a futex keeps its processor until the Go")
		fmt.Fprintln(w, "runtime takes it back, and the other worker waits for it; mem is the transport within a process.")
		writeTargets(w, rows)
	})
}
