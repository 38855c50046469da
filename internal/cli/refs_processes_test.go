package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rrefkit/rref/fifo"
	"github.com/rrefkit/rref/internal/freeport"
	"github.com/rrefkit/rref/internal/refview"
	"github.com/rrefkit/rref/runtime/observe"
	"github.com/rrefkit/rref/runtime/worker"
)

// The member processes of TestRefsAcrossProcesses are this test binary
// again, told by these variables which member to be.
const (
	refsMemberEnv = "RREF_REFS_MEMBER" // its name: a, b or c
	refsPeersEnv  = "RREF_REFS_PEERS"  // the group: name=host:port,...
	refsDebugEnv  = "RREF_REFS_DEBUG"  // its debug listener's address
)

// Member a holds refsRemotes values of b's, made by Remote, and lends
// refsLent of them to c, which keeps them: a few hundred references.
const (
	refsRemotes = 300
	refsLent    = 100
	// refsDeadAfter is short so that b's death is known soon after the
	// kill; the loaded host's pauses stay well below it in this test.
	refsDeadAfter = 3 * time.Second
)

// Lines member a and the test exchange over a's stdin and stdout.
const (
	lineReady   = "ready"   // a: its references made and lent, all confirmed
	lineLend    = "lend"    // test: lend one more to c (b is stopped)
	lineLending = "lending" // a: the call carrying it is under way
)

func init() {
	// A member process runs its part and never returns to the tests.
	if name := os.Getenv(refsMemberEnv); name != "" {
		if err := runRefsMember(name); err != nil {
			fmt.Fprintf(os.Stderr, "member %s: %v\n", name, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
}

// runRefsMember is one member of the group: a holds and lends, b owns,
// c keeps what it is lent; each serves its debug listener, until killed.
func runRefsMember(name string) error {
	var peers []worker.Peer
	for _, p := range strings.Split(os.Getenv(refsPeersEnv), ",") {
		n, addr, _ := strings.Cut(p, "=")
		peers = append(peers, worker.Peer{Name: n, Addr: addr})
	}
	var mu sync.Mutex
	var kept []*worker.RRef[int]
	cfg := worker.Config{
		Logger:         slog.New(slog.NewTextHandler(io.Discard, nil)),
		RecordRefSites: true,
		FIFO:           fifo.Config{DeadAfter: refsDeadAfter},
		Setup: func(w *worker.Worker) {
			worker.Register(w, "add", func(ctx context.Context, x [2]int) (int, error) { return x[0] + x[1], nil })
			worker.Register(w, "keep", func(ctx context.Context, r *worker.RRef[int]) (int, error) {
				mu.Lock()
				kept = append(kept, r.Keep())
				mu.Unlock()
				return 0, nil
			})
		},
	}
	ctx := context.Background()
	startCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	w, err := worker.Start(startCtx, name, peers, []byte("refs test secret"), cfg)
	if err != nil {
		return err
	}
	if _, err := observe.Serve(ctx, w, os.Getenv(refsDebugEnv)); err != nil {
		return err
	}
	if name != "a" {
		select {} // serves until the test kills it
	}
	refs := make([]*worker.RRef[int], refsRemotes)
	for i := range refs {
		if refs[i], err = worker.Remote[int](ctx, w, "b", "add", [2]int{i, 1}); err != nil {
			return err
		}
	}
	for _, r := range refs[:refsLent] {
		if _, err := worker.Call[int](ctx, w, "c", "keep", r); err != nil {
			return err
		}
	}
	for _, r := range refs {
		for !r.Confirmed() {
			time.Sleep(time.Millisecond)
		}
	}
	fmt.Println(lineReady)
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		if in.Text() == lineLend {
			last := refs[len(refs)-1]
			go worker.Call[int](ctx, w, "c", "keep", last) // waits on b, stopped, then dead
			fmt.Println(lineLending)
		}
	}
	select {}
}

// TestRefsAcrossProcesses: a group of three processes over tcp holding a
// few hundred references shows them in rrefgen refs and in the JSON as
// they are: all confirmed; then, with the owner stopped, a copy in flight
// pinned by its lender and awaited by its receiver; then, the owner killed
// -9, every reference to its values orphaned, and the owner's listener
// named as not reached.
func TestRefsAcrossProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var g *refsGroup
	for attempt := 1; ; attempt++ {
		var err error
		if g, err = startRefsGroup(t, ctx); err == nil {
			break
		} else if !errors.Is(err, errPortTaken) || attempt == refsStartAttempts {
			t.Fatal(err)
		}
		t.Logf("attempt %d: %v; again with other ports", attempt, err)
	}
	procs, debug, aIn := g.procs, g.debug, g.aIn
	expectLine := g.expectLine(t)

	// All confirmed: b owns every value, a holds all, c the lent ones.
	code, out, errs := run(t, "", "refs", strings.Join(debug, ","))
	want := fmt.Sprintf("3 members (a, b, c), %d values owned, %d references, %d held by programs, %d confirmed; 0 copies in flight",
		refsRemotes, refsRemotes+refsLent, refsRemotes+refsLent, refsRemotes+refsLent)
	if code != ExitOK || !strings.Contains(out, want) {
		t.Fatalf("rrefgen refs of the settled group: exit %d, no %q in\n%s%s", code, want, out, errs)
	}

	// The owner stopped: a copy lent now waits for it, pinned on a and
	// awaiting on c.
	b := procs[1].Process
	if err := b.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	fmt.Fprintln(aIn, lineLend)
	expectLine(lineLending)
	live := []string{debug[0], debug[2]}
	waitRefs(t, live, "a copy in flight to c", func(c refview.Counts) bool {
		return c.ByState[worker.RefPinned] == 1 && c.ByState[worker.RefAwaiting] == 1 && c.Lent == 1
	})
	code, out, _ = run(t, "", "refs", "-by", "member", strings.Join(live, ","))
	if code != ExitOK || !strings.Contains(out, "pinned") || !strings.Contains(out, "awaiting") {
		t.Errorf("rrefgen refs with a copy in flight: exit %d\n%s", code, out)
	}

	// The owner killed: every reference to its values is orphaned, the
	// pin on the copy in flight resolved with them.
	if err := b.Kill(); err != nil {
		t.Fatal(err)
	}
	b.Signal(syscall.SIGCONT)
	<-g.exited[1]
	all := refsRemotes + refsLent + 1
	waitRefs(t, live, "every reference orphaned", func(c refview.Counts) bool {
		return c.ByState[worker.RefOrphaned] == all && c.References == all
	})
	code, out, errs = run(t, "", "refs", strings.Join(debug, ","))
	if code != ExitFail || !strings.Contains(out, fmt.Sprintf("%d orphaned", all)) || !strings.Contains(errs, "not reached: "+debug[1]) {
		t.Errorf("rrefgen refs after the owner's kill: exit %d, want %d orphaned and b's listener not reached\n%s%s", code, all, out, errs)
	}
	// The page shows a's references orphaned too.
	resp, err := http.Get("http://" + debug[0] + observe.RefsViewPath + "?by=member")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if n := strings.Count(string(page), string(worker.RefOrphaned)); resp.StatusCode != http.StatusOK || n < refsRemotes {
		t.Errorf("a's page after the owner's kill: status %d, %q %d times, want at least %d", resp.StatusCode, worker.RefOrphaned, n, refsRemotes)
	}
}

// refsStartAttempts bounds the restarts of a group whose chosen port was
// taken between freeAddr's probe and the member's listen: the port is free
// a moment before, but another test on the host may dial out of it.
const refsStartAttempts = 3

// errPortTaken says a member could not listen on the port chosen for it.
var errPortTaken = errors.New("a member's port was taken before it could listen")

// refsGroup is the three member processes, a's stdin and stdout, and the
// members' debug listener addresses.
type refsGroup struct {
	procs  []*exec.Cmd
	exited []chan struct{} // closed when procs[i] has exited
	debug  []string
	aIn    io.WriteCloser
	aOut   *bufio.Scanner
}

// startRefsGroup starts a, b and c on fresh loopback ports and waits for a
// to say it is ready; errPortTaken when a member found its port taken. A
// member that exits before a is ready ends the attempt at once, so that a
// taken port costs no Start timeout in the others.
func startRefsGroup(t *testing.T, ctx context.Context) (*refsGroup, error) {
	t.Helper()
	names := []string{"a", "b", "c"}
	var peers []string
	g := &refsGroup{}
	addrs, err := freeport.Loopback(2 * len(names)) // each member's own, then its debug listener's
	if err != nil {
		t.Fatal(err)
	}
	for i, n := range names {
		peers = append(peers, n+"="+addrs[i])
		g.debug = append(g.debug, addrs[len(names)+i])
	}
	var stderr lockedBuffer
	anyExit := make(chan struct{}, len(names))
	for i, n := range names {
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), refsMemberEnv+"="+n, refsPeersEnv+"="+strings.Join(peers, ","), refsDebugEnv+"="+g.debug[i])
		cmd.Stderr = io.MultiWriter(os.Stderr, &stderr)
		if n == "a" {
			var err error
			if g.aIn, err = cmd.StdinPipe(); err != nil {
				return nil, err
			}
			out, err := cmd.StdoutPipe()
			if err != nil {
				return nil, err
			}
			g.aOut = bufio.NewScanner(out)
		}
		if err := cmd.Start(); err != nil {
			g.stop()
			return nil, err
		}
		exited := make(chan struct{})
		go func() {
			cmd.Wait()
			close(exited)
			anyExit <- struct{}{}
		}()
		g.procs = append(g.procs, cmd)
		g.exited = append(g.exited, exited)
	}
	ready := make(chan bool, 1)
	go func() { ready <- g.aOut.Scan() && g.aOut.Text() == lineReady }()
	var ok bool
	select {
	case ok = <-ready:
	case <-anyExit:
	case <-ctx.Done():
	}
	if ok {
		t.Cleanup(g.stop)
		return g, nil
	}
	g.stop()
	if strings.Contains(stderr.String(), "address already in use") {
		return nil, errPortTaken
	}
	return nil, fmt.Errorf("member a never said %q (%v); the members' stderr is above", lineReady, ctx.Err())
}

// stop kills every member started, stopped ones too, and waits for them.
func (g *refsGroup) stop() {
	for i, p := range g.procs {
		p.Process.Signal(syscall.SIGCONT) // a stopped process is killed only once it runs
		p.Process.Kill()
		<-g.exited[i]
	}
	http.DefaultClient.CloseIdleConnections()
}

// expectLine fails the test unless a's next line is want.
func (g *refsGroup) expectLine(t *testing.T) func(want string) {
	return func(want string) {
		t.Helper()
		if !g.aOut.Scan() || g.aOut.Text() != want {
			t.Fatalf("member a said %q (%v), want %q", g.aOut.Text(), g.aOut.Err(), want)
		}
	}
}

// lockedBuffer collects the members' stderr, written from several
// goroutines of exec.
type lockedBuffer struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// waitRefs polls the members' listeners until their joined counts satisfy
// ok, failing the test after a bound that DeadAfter and a loaded host fit.
func waitRefs(t *testing.T, addrs []string, what string, ok func(refview.Counts) bool) {
	t.Helper()
	const bound = 60 * time.Second
	deadline := time.Now().Add(bound)
	var last refview.Counts
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		d, err := refview.FetchAll(ctx, http.DefaultClient, addrs)
		cancel()
		if err != nil && !errors.Is(err, context.DeadlineExceeded) {
			t.Fatal(err)
		}
		if last = refview.Join(d).Count(); ok(last) {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s: not seen within %v; last counts %+v", what, bound, last)
}
