package worker

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/rrefkit/rref/fifo"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if spec := os.Getenv("RREF_WORKER_PEER"); spec != "" {
		switch os.Getenv("RREF_WORKER_ROLE") {
		case "A":
			os.Exit(runClient(spec))
		case "idle":
			os.Exit(runIdle(spec))
		case "partition":
			os.Exit(runPartitioned(spec))
		case "holder":
			os.Exit(runHolder(spec))
		case "member":
			os.Exit(runMember(spec, os.Getenv("RREF_WORKER_SELF")))
		}
		os.Exit(runPeer(spec))
	}
	goleak.VerifyTestMain(m)
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func group(t *testing.T, names ...string) []*Worker {
	t.Helper()
	ws, err := NewGroup(names, Config{Logger: quiet, CallTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range ws {
		Register(w, "add", func(ctx context.Context, x [2]int) (int, error) { return x[0] + x[1], nil })
		Register(w, "fail", func(ctx context.Context, x int) (int, error) { return 0, errors.New("no luck") })
		Register(w, "fetch", func(ctx context.Context, r *RRef[int]) (int, error) { return r.ToHere(ctx) })
		Register(w, "keep", func(ctx context.Context, r *RRef[int]) (*RRef[int], error) { return r, nil })
		Register(w, "make", func(ctx context.Context, v int) (*RRef[int], error) { return NewRRef(w, v) })
	}
	return ws
}

// shutdown closes every worker gracefully and fails the test on a leak.
func shutdown(t *testing.T, ws []*Worker) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	errs := make(chan error, len(ws))
	for _, w := range ws {
		go func(w *Worker) { errs <- w.Shutdown(ctx) }(w)
	}
	for range ws {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestCallAndErrors(t *testing.T) {
	ws := group(t, "A", "B")
	defer shutdown(t, ws)
	ctx := ctxT(t)
	if v, err := Call[int](ctx, ws[0], "B", "add", [2]int{2, 3}); err != nil || v != 5 {
		t.Fatalf("add: %v %v", v, err)
	}
	var ue *UserError
	if _, err := Call[int](ctx, ws[0], "B", "fail", 1); !errors.As(err, &ue) || ue.Message != "no luck" {
		t.Fatalf("fail: %v", err)
	}
	if _, err := Call[int](ctx, ws[0], "B", "nope", 1); !errors.Is(err, ErrUnknownFunction) {
		t.Fatalf("unknown function: %v", err)
	}
	if _, err := Call[int](ctx, ws[0], "Z", "add", [2]int{}); !errors.Is(err, ErrUnknownWorker) {
		t.Fatalf("unknown worker: %v", err)
	}
	f := Go[int](ctx, ws[0], "B", "add", [2]int{20, 22})
	if v, err := f.Wait(ctx); err != nil || v != 42 {
		t.Fatalf("Go: %v %v", v, err)
	}
}

// Seed flow 1: remote then to_here.
func TestSeedFlow1RemoteToHere(t *testing.T) {
	ws := group(t, "A", "B")
	defer shutdown(t, ws)
	ctx := ctxT(t)
	r, err := Remote[int](ctx, ws[0], "B", "add", [2]int{1, 2})
	if err != nil {
		t.Fatal(err)
	}
	if r.Owner() != "B" || r.IsOwner() {
		t.Fatalf("owner %s", r.Owner())
	}
	if v, err := r.ToHere(ctx); err != nil || v != 3 {
		t.Fatalf("ToHere: %v %v", v, err)
	}
	r.Release()
	r.Release() // idempotent
	if _, err := r.ToHere(ctx); !errors.Is(err, ErrDeleted) {
		t.Fatalf("ToHere after Release: %v", err)
	}
}

// Seed flow 2: a user passes the RRef to its owner as an argument.
func TestSeedFlow2UserToOwner(t *testing.T) {
	ws := group(t, "A", "B")
	defer shutdown(t, ws)
	ctx := ctxT(t)
	r, _ := Remote[int](ctx, ws[0], "B", "add", [2]int{4, 5})
	if v, err := Call[int](ctx, ws[0], "B", "fetch", r); err != nil || v != 9 {
		t.Fatalf("fetch on the owner: %v %v", v, err)
	}
	r.Release()
}

// Seed flow 3: the owner passes its RRef to a user.
func TestSeedFlow3OwnerToUser(t *testing.T) {
	ws := group(t, "B", "C")
	defer shutdown(t, ws)
	ctx := ctxT(t)
	r, _ := NewRRef(ws[0], 77)
	if !r.IsOwner() || !r.Confirmed() {
		t.Fatal("a local RRef is owned and confirmed")
	}
	if v, err := r.LocalValue(ctx); err != nil || v != 77 {
		t.Fatalf("LocalValue: %v %v", v, err)
	}
	if v, err := Call[int](ctx, ws[0], "C", "fetch", r); err != nil || v != 77 {
		t.Fatalf("fetch on a user: %v %v", v, err)
	}
	r.Release()
}

// Seed flow 4: a user passes the RRef to another user.
func TestSeedFlow4UserToUser(t *testing.T) {
	ws := group(t, "A", "B", "C")
	defer shutdown(t, ws)
	ctx := ctxT(t)
	r, _ := Remote[int](ctx, ws[0], "B", "add", [2]int{10, 1})
	if v, err := Call[int](ctx, ws[0], "C", "fetch", r); err != nil || v != 11 {
		t.Fatalf("fetch on another user: %v %v", v, err)
	}
	r.Release()
}

// An RRef returned by a call is usable at once; a remote function's error is
// stored on the OwnerRRef and raised by ToHere.
func TestReturnedRRefAndStoredError(t *testing.T) {
	ws := group(t, "A", "B", "C")
	defer shutdown(t, ws)
	ctx := ctxT(t)
	r, err := Call[*RRef[int]](ctx, ws[0], "B", "make", 5)
	if err != nil {
		t.Fatal(err)
	}
	if r.Owner() != "B" {
		t.Fatalf("returned RRef owned by %s", r.Owner())
	}
	if v, err := r.ToHere(ctx); err != nil || v != 5 {
		t.Fatalf("ToHere of a returned RRef: %v %v", v, err)
	}
	back, err := Call[*RRef[int]](ctx, ws[0], "C", "keep", r)
	if err != nil {
		t.Fatal(err)
	}
	if v, err := back.ToHere(ctx); err != nil || v != 5 {
		t.Fatalf("round-tripped RRef: %v %v", v, err)
	}
	r.Release()
	back.Release()
	bad, _ := Remote[int](ctx, ws[0], "B", "fail", 1)
	var ue *UserError
	if _, err := bad.ToHere(ctx); !errors.As(err, &ue) {
		t.Fatalf("stored error: %v", err)
	}
	bad.Release()
}

func TestSelfRemote(t *testing.T) {
	ws := group(t, "A")
	defer shutdown(t, ws)
	ctx := ctxT(t)
	r, _ := Remote[int](ctx, ws[0], "A", "add", [2]int{1, 1})
	if v, err := r.ToHere(ctx); err != nil || v != 2 || !r.IsOwner() {
		t.Fatalf("self remote: %v %v", v, err)
	}
	if n := ws[0].DebugInfo(); n.Owners != 1 || n.Forks != 1 {
		t.Fatalf("counters %+v", n.Counters)
	}
	r.Release()
}

// A dead owner makes ToHere fail fast; a dead worker's calls fail at once.
func TestOwnerFailure(t *testing.T) {
	ws := group(t, "A", "B")
	defer shutdown(t, ws[:1])
	ctx := ctxT(t)
	r, _ := Remote[int](ctx, ws[0], "B", "add", [2]int{1, 1})
	if _, err := r.ToHere(ctx); err != nil {
		t.Fatal(err)
	}
	ws[1].Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, err := r.ToHere(ctx)
		if errors.Is(err, ErrOwnerFailed) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("ToHere after the owner died: %v", err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if _, err := Call[int](ctx, ws[0], "B", "add", [2]int{}); !errors.Is(err, ErrPeerFailed) {
		t.Fatalf("call to a dead worker: %v", err)
	}
	r.Release()
}

// Shutdown reports a leak by RRef and fork when a reference is never released.
func TestShutdownReportsLeaks(t *testing.T) {
	ws := group(t, "A", "B")
	ctx := ctxT(t)
	r, _ := Remote[int](ctx, ws[0], "B", "add", [2]int{1, 1})
	r.ToHere(ctx)
	sctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	err := ws[1].Shutdown(sctx)
	var le *LeakError
	if !errors.As(err, &le) || !errors.Is(err, ErrLeak) || le.Worker != "B" {
		t.Fatalf("shutdown with a live RRef: %v", err)
	}
	ws[0].Close()
	_ = r
}

// Many concurrent users of one value, passing it around: nothing leaks.
func TestConcurrentSharing(t *testing.T) {
	ws := group(t, "A", "B", "C", "D")
	defer shutdown(t, ws)
	ctx := ctxT(t)
	r, _ := Remote[int](ctx, ws[0], "B", "add", [2]int{20, 22})
	errs := make(chan error, 40)
	for i := 0; i < 40; i++ {
		go func(i int) {
			to := []string{"B", "C", "D"}[i%3]
			v, err := Call[int](ctx, ws[0], to, "fetch", r)
			if err == nil && v != 42 {
				err = errors.New("wrong value")
			}
			errs <- err
		}(i)
	}
	for i := 0; i < 40; i++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	r.Release()
}

var secret = []byte("worker test")

func peersFor(transport string) []Peer {
	if transport == "shm" {
		g := fmt.Sprintf("shm:wt%d", os.Getpid())
		return []Peer{{"A", g}, {"B", g}}
	}
	addr := func() string {
		ln, _ := net.Listen("tcp", "127.0.0.1:0")
		defer ln.Close()
		return ln.Addr().String()
	}
	return []Peer{{"A", addr()}, {"B", addr()}}
}

// startMembers starts every member of peers in this process at once, each
// with cfg, as their processes would; the test fails if any does not start.
func startMembers(t *testing.T, ctx context.Context, peers []Peer, cfg Config) []*Worker {
	t.Helper()
	ws := make([]*Worker, len(peers))
	errs := make(chan error, len(peers))
	for i := range peers {
		go func() {
			var err error
			ws[i], err = Start(ctx, peers[i].Name, peers, secret, cfg)
			errs <- err
		}()
	}
	var failed error
	for range peers {
		if err := <-errs; err != nil && failed == nil {
			failed = err
		}
	}
	if failed != nil {
		for _, w := range ws {
			if w != nil {
				w.Close()
			}
		}
		t.Fatal(failed)
	}
	return ws
}

// runPeer is worker B in another process: it serves until A says bye, then
// shuts down gracefully and exits 1 on a leak.
func runPeer(spec string) int {
	return serveAsB("peer", spec, func(w *Worker) {
		Register(w, "add", func(ctx context.Context, x [2]int) (int, error) { return x[0] + x[1], nil })
		Register(w, "fetch", func(ctx context.Context, r *RRef[int]) (int, error) { return r.ToHere(ctx) })
	})
}

// serveAsB is worker B in a process of its own: it registers setup's
// functions and "bye" before any peer connects (A may call the moment it
// can), serves until A calls bye, then shuts down gracefully. Exit codes:
// 0 clean, 1 leak, 2 no start, 3 no bye in time.
func serveAsB(role, spec string, setup func(w *Worker)) int {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	bye := make(chan struct{})
	w, err := Start(ctx, "B", parseSpec(spec), secret, Config{Logger: quiet, Setup: func(w *Worker) {
		setup(w)
		Register(w, "bye", func(ctx context.Context, _ int) (int, error) { close(bye); return 0, nil })
	}})
	if err != nil {
		fmt.Fprintln(os.Stderr, role+":", err)
		return 2
	}
	select {
	case <-bye:
	case <-ctx.Done():
		return 3
	}
	sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer scancel()
	if err := w.Shutdown(sctx); err != nil {
		fmt.Fprintln(os.Stderr, role+":", err)
		return 1
	}
	return 0
}

// TestAcrossProcesses runs the seed flows between this process and another,
// over tcp and over shared memory.
func TestAcrossProcesses(t *testing.T) {
	for _, transport := range []string{"tcp", "shm"} {
		t.Run(transport, func(t *testing.T) {
			peers := peersFor(transport)
			var spec []string
			for _, p := range peers {
				spec = append(spec, p.Name+"="+p.Addr)
			}
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), "RREF_WORKER_PEER="+strings.Join(spec, ";"))
			cmd.Stderr = os.Stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			a, err := Start(ctx, "A", peers, secret, Config{Logger: quiet})
			if err != nil {
				cmd.Process.Kill()
				cmd.Wait()
				t.Fatal(err)
			}
			r, err := Remote[int](ctx, a, "B", "add", [2]int{40, 2})
			if err != nil {
				t.Fatal(err)
			}
			if v, err := r.ToHere(ctx); err != nil || v != 42 {
				t.Fatalf("ToHere across processes: %v %v", v, err)
			}
			if v, err := Call[int](ctx, a, "B", "fetch", r); err != nil || v != 42 {
				t.Fatalf("RRef passed to its owner: %v %v", v, err)
			}
			mine, _ := NewRRef(a, 7)
			if v, err := Call[int](ctx, a, "B", "fetch", mine); err != nil || v != 7 {
				t.Fatalf("RRef passed to a user: %v %v", v, err)
			}
			r.Release()
			mine.Release()
			if _, err := Call[int](ctx, a, "B", "bye", 0); err != nil {
				t.Fatal(err)
			}
			sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer scancel()
			if err := a.Shutdown(sctx); err != nil {
				t.Error(err)
			}
			if err := cmd.Wait(); err != nil {
				t.Fatalf("peer process: %v", err)
			}
		})
	}
}

// A call with no deadline of its own gets the default timeout: the caller
// stops waiting after it even when the function ignores its context.
func TestDefaultCallTimeout(t *testing.T) {
	ws, err := NewGroup([]string{"A", "B"}, Config{Logger: quiet, CallTimeout: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer ws[0].Close()
	defer ws[1].Close()
	block := make(chan struct{})
	Register(ws[1], "slow", func(ctx context.Context, _ int) (int, error) {
		<-block // deaf to its context
		return 0, nil
	})
	start := time.Now()
	if _, err := Call[int](context.Background(), ws[0], "B", "slow", 0); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("slow call: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("timed out after %v", d)
	}
	close(block)
}

// TestImportRegistersNothing: a program that imports only the runtime
// links no metrics library and finds http.DefaultServeMux empty of pprof
// (observability is package runtime/observe, opted into).
func TestImportRegistersNothing(t *testing.T) {
	if _, pattern := http.DefaultServeMux.Handler(&http.Request{Method: "GET", URL: &url.URL{Path: "/debug/pprof/"}}); pattern != "" {
		t.Errorf("the runtime registered %q on http.DefaultServeMux", pattern)
	}
	if testing.Short() {
		return
	}
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, dep := range strings.Fields(string(out)) {
		if strings.Contains(dep, "prometheus") || strings.Contains(dep, "protobuf") || dep == "net/http/pprof" {
			t.Errorf("runtime/worker depends on %s", dep)
		}
	}
}

func parseSpec(spec string) []Peer {
	var peers []Peer
	for _, p := range strings.Split(spec, ";") {
		name, addr, _ := strings.Cut(p, "=")
		peers = append(peers, Peer{Name: name, Addr: addr})
	}
	return peers
}

// runClient is worker A in its own process: the seed flows against B, then bye.
func runClient(spec string) int {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	a, err := Start(ctx, "A", parseSpec(spec), secret, Config{Logger: quiet})
	if err != nil {
		fmt.Fprintln(os.Stderr, "client:", err)
		return 2
	}
	check := func(what string, v int, err error, want int) bool {
		if err != nil || v != want {
			fmt.Fprintf(os.Stderr, "client: %s: %v %v\n", what, v, err)
			return false
		}
		return true
	}
	r, err := Remote[int](ctx, a, "B", "add", [2]int{40, 2})
	if err != nil {
		fmt.Fprintln(os.Stderr, "client:", err)
		return 1
	}
	v, err := r.ToHere(ctx)
	ok := check("ToHere", v, err, 42)
	v, err = Call[int](ctx, a, "B", "fetch", r)
	ok = check("RRef to its owner", v, err, 42) && ok
	r.Release()
	if _, err := Call[int](ctx, a, "B", "bye", 0); err != nil {
		fmt.Fprintln(os.Stderr, "client: bye:", err)
		return 1
	}
	sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer scancel()
	if err := a.Shutdown(sctx); err != nil {
		fmt.Fprintln(os.Stderr, "client:", err)
		return 1
	}
	if !ok {
		return 1
	}
	return 0
}

// hosts are two network namespaces joined by a veth pair, each with its
// own address: two hosts as far as tcp can tell.
type hosts struct {
	nsA, nsB, vA, addrA, addrB string
	run                        func(args ...string) error
}

// testHosts builds the two hosts, or skips the test with the reason (it
// needs root and iproute2). They are removed when the test ends.
func testHosts(t *testing.T) *hosts {
	if testing.Short() {
		t.Skip("builds network namespaces")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root to create network namespaces (ip netns)")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("needs iproute2's ip command for network namespaces")
	}
	id := (os.Getpid()*7 + len(t.Name())) % 50000
	h := &hosts{nsA: fmt.Sprintf("rref-a-%d", id), nsB: fmt.Sprintf("rref-b-%d", id), vA: fmt.Sprintf("rra%d", id),
		// 10.213.0.0/30 exists only inside these two namespaces.
		addrA: "10.213.0.1", addrB: "10.213.0.2"}
	vB := fmt.Sprintf("rrb%d", id)
	h.run = func(args ...string) error {
		out, err := exec.Command("ip", args...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
		return nil
	}
	t.Cleanup(func() { h.run("netns", "del", h.nsA); h.run("netns", "del", h.nsB) })
	for _, step := range [][]string{
		{"netns", "add", h.nsA}, {"netns", "add", h.nsB},
		{"link", "add", h.vA, "type", "veth", "peer", "name", vB},
		{"link", "set", h.vA, "netns", h.nsA}, {"link", "set", vB, "netns", h.nsB},
		{"-n", h.nsA, "addr", "add", h.addrA + "/30", "dev", h.vA}, {"-n", h.nsB, "addr", "add", h.addrB + "/30", "dev", vB},
		{"-n", h.nsA, "link", "set", h.vA, "up"}, {"-n", h.nsB, "link", "set", vB, "up"},
		{"-n", h.nsA, "link", "set", "lo", "up"}, {"-n", h.nsB, "link", "set", "lo", "up"},
	} {
		if err := h.run(step...); err != nil {
			t.Skipf("cannot build the test hosts here: %v", err)
		}
	}
	return h
}

// start runs this test binary as worker role in namespace ns.
func (h *hosts) start(t *testing.T, ns, spec, role string) *exec.Cmd {
	cmd := exec.Command("ip", "netns", "exec", ns, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "RREF_WORKER_PEER="+spec, "RREF_WORKER_ROLE="+role)
	cmd.Stderr = os.Stderr
	return cmd
}

// TestAcrossHosts runs two workers on two hosts over tcp.
func TestAcrossHosts(t *testing.T) {
	h := testHosts(t)
	spec := fmt.Sprintf("A=%s:7301;B=%s:7302", h.addrA, h.addrB)
	b, a := h.start(t, h.nsB, spec, "B"), h.start(t, h.nsA, spec, "A")
	if err := b.Start(); err != nil {
		t.Fatal(err)
	}
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	errA, errB := a.Wait(), b.Wait()
	if errA != nil || errB != nil {
		t.Fatalf("worker A on host %s: %v; worker B on host %s: %v", h.addrA, errA, h.addrB, errB)
	}
}

// TestPartitionDetected cuts the link between two hosts: no EOF, no reset,
// just silence. Worker B's next call to A must fail with ErrPeerFailed
// once the liveness bound passes (tcp keepalives and the unacknowledged
// data timeout), rather than hang until the call's own timeout.
func TestPartitionDetected(t *testing.T) {
	h := testHosts(t)
	spec := fmt.Sprintf("A=%s:7303;B=%s:7304", h.addrA, h.addrB)
	a, b := h.start(t, h.nsA, spec, "idle"), h.start(t, h.nsB, spec, "partition")
	aIn, err := a.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	bIn, err := b.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	bOut, err := b.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { aIn.Close(); a.Wait() }()
	if err := b.Start(); err != nil {
		t.Fatal(err)
	}
	line := make([]byte, 6)
	if _, err := io.ReadFull(bOut, line); err != nil || string(line) != "ready\n" {
		b.Wait()
		t.Fatalf("worker B did not connect: %q %v", line, err)
	}
	if err := h.run("-n", h.nsA, "link", "set", h.vA, "down"); err != nil {
		t.Fatal(err)
	}
	bIn.Write([]byte("cut\n"))
	if err := b.Wait(); err != nil {
		t.Fatalf("worker B did not see A fail after the link was cut: %v", err)
	}
}

// runIdle is worker A of TestPartitionDetected: it serves until its
// standard input closes.
func runIdle(spec string) int {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	w, err := Start(ctx, "A", parseSpec(spec), secret, Config{Logger: quiet, FIFO: fifo.Config{DeadAfter: 2 * time.Second},
		Setup: func(w *Worker) {
			Register(w, "add", func(ctx context.Context, x [2]int) (int, error) { return x[0] + x[1], nil })
		}})
	if err != nil {
		fmt.Fprintln(os.Stderr, "idle:", err)
		return 2
	}
	io.Copy(io.Discard, os.Stdin)
	w.Close()
	return 0
}

// runPartitioned is worker B of TestPartitionDetected: once connected it
// says ready, waits for the cut, then calls A and expects ErrPeerFailed.
func runPartitioned(spec string) int {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// A short liveness bound: this test is about noticing the cut at all.
	w, err := Start(ctx, "B", parseSpec(spec), secret, Config{Logger: quiet, FIFO: fifo.Config{DeadAfter: 2 * time.Second}})
	if err != nil {
		fmt.Fprintln(os.Stderr, "partitioned:", err)
		return 2
	}
	defer w.Close()
	if v, err := Call[int](ctx, w, "A", "add", [2]int{1, 2}); err != nil || v != 3 {
		fmt.Fprintln(os.Stderr, "partitioned: call before the cut:", v, err)
		return 2
	}
	fmt.Println("ready")
	bufio.NewReader(os.Stdin).ReadString('\n')
	cctx, ccancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer ccancel()
	start := time.Now()
	_, err = Call[int](cctx, w, "A", "add", [2]int{1, 2})
	if !errors.Is(err, ErrPeerFailed) {
		fmt.Fprintf(os.Stderr, "partitioned: call after the cut returned %v after %v, want ErrPeerFailed\n", err, time.Since(start))
		return 1
	}
	return 0
}

// TestRegisterTwiceIsRefused: a second Register of a name is an error and
// the first function stays.
func TestRegisterTwiceIsRefused(t *testing.T) {
	ws := group(t, "A", "B")
	defer shutdown(t, ws)
	err := Register(ws[1], "add", func(ctx context.Context, x [2]int) (int, error) { return -1, nil })
	if !errors.Is(err, ErrDuplicateFunction) || !strings.Contains(err.Error(), `"add"`) {
		t.Fatalf("second Register: %v", err)
	}
	if v, err := Call[int](ctxT(t), ws[0], "B", "add", [2]int{2, 3}); err != nil || v != 5 {
		t.Fatalf("the first add must stay: %d %v", v, err)
	}
}

// TestFutureDone: a Future's Done channel closes when its result is in, so
// a caller can select on it.
func TestFutureDone(t *testing.T) {
	ws := group(t, "A", "B")
	defer shutdown(t, ws)
	f := Go[int](ctxT(t), ws[0], "B", "add", [2]int{20, 22})
	select {
	case <-f.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("Done never closed")
	}
	if v, err := f.Wait(ctxT(t)); err != nil || v != 42 {
		t.Fatalf("%d %v", v, err)
	}
}

// TestTypeMismatchIsRefused: a call whose argument or result type is not
// the function's is refused by the callee before the function runs,
// naming both sides' types, and errors.Is matches ErrTypeMismatch; a
// Remote of the wrong type fails its ToHere instead of decoding garbage.
func TestTypeMismatchIsRefused(t *testing.T) {
	ws := group(t, "A", "B")
	defer shutdown(t, ws)
	ctx := ctxT(t)
	_, err := Call[string](ctx, ws[0], "B", "add", [2]int{1, 2})
	if !errors.Is(err, ErrTypeMismatch) || !strings.Contains(err.Error(), "takes [2]int and returns int") ||
		!strings.Contains(err.Error(), "call takes [2]int and returns string") {
		t.Fatalf("Call[string] of an int function: %v", err)
	}
	if _, err := Go[int](ctx, ws[0], "B", "add", "one and two").Wait(ctx); !errors.Is(err, ErrTypeMismatch) {
		t.Fatalf("Go with a string argument: %v", err)
	}
	r, err := Remote[string](ctx, ws[0], "B", "add", [2]int{1, 2})
	if err != nil {
		t.Fatal(err)
	}
	if v, err := r.ToHere(ctx); err == nil || !strings.Contains(err.Error(), "type mismatch") {
		t.Fatalf("Remote[string] of an int function gave %q, %v", v, err)
	}
	r.Release()
	if v, err := Call[int](ctx, ws[0], "B", "add", [2]int{1, 2}); err != nil || v != 3 {
		t.Fatalf("the right types: %d %v", v, err)
	}
	if err := Register(ws[1], "bad\x00name", func(ctx context.Context, x int) (int, error) { return x, nil }); err == nil {
		t.Fatal("a name with a NUL byte was registered")
	}
}

// TestOnPeerFailed: a worker is told, once, of a peer that closed, after
// its protocol state has dropped what the peer held.
func TestOnPeerFailed(t *testing.T) {
	told := make(chan string, 4)
	ws, err := NewGroup([]string{"A", "B"}, Config{Logger: quiet, OnPeerFailed: func(peer string, err error) {
		if err == nil {
			t.Error("no reason given")
		}
		told <- peer
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer closeAll(ws)
	ws[1].Close()
	select {
	case p := <-told:
		if p != "B" {
			t.Fatalf("told of %q", p)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("never told that B closed")
	}
	select {
	case p := <-told:
		if p == "B" {
			t.Fatal("told twice")
		}
	case <-time.After(100 * time.Millisecond):
	}
}
