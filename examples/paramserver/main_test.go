package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rrefkit/rref/internal/cli"
	"github.com/rrefkit/rref/internal/freeport"
	"github.com/rrefkit/rref/runtime/worker"
)

// Two trainers update asynchronously from snapshots that may be stale, so
// how far the loss falls in 40 updates depends on the interleaving: the
// test asks for a fall of over three orders of magnitude, not an exact one.
func TestLocalTraining(t *testing.T) {
	var out bytes.Buffer
	if err := runLocal(&out, testOptions(2, 20)); err != nil {
		t.Fatal(err)
	}
	var before, after float64
	var updates int
	for _, line := range strings.Split(out.String(), "\n") {
		fmt.Sscanf(line, "loss before: %g", &before)
		fmt.Sscanf(line, "loss after %d updates: %g", &updates, &after)
	}
	if updates != 40 || before == 0 || after > before/1000 || !strings.Contains(out.String(), "no parameter snapshot leaked") {
		t.Fatalf("training did not converge or leaked:\n%s", out.String())
	}
}

// TestForgottenRelease: a trainer that keeps a snapshot and never releases
// it makes the group's Shutdown give up with a *LeakError naming the value,
// its owner and the trainer keeping it alive.
func TestForgottenRelease(t *testing.T) {
	o := testOptions(2, 5)
	o.forget = true
	o.shutdownTimeout = time.Second
	var out bytes.Buffer
	err := runLocal(&out, o)
	if !errors.Is(err, worker.ErrLeak) {
		t.Fatalf("runLocal -forget = %v, want a leak\n%s", err, out.String())
	}
	var leak *worker.LeakError
	if !errors.As(err, &leak) {
		t.Fatalf("%v is no *worker.LeakError", err)
	}
	found := false
	for _, h := range leak.Held {
		if h.Kind == worker.HeldValue && h.Owner == "server" && strings.Join(h.Holders, ",") == "t1" {
			found = true
		}
	}
	if leak.Worker != "server" || !found {
		t.Errorf("the first leak report is not the server's snapshot kept alive by t1:\n%v", err)
	}
}

// TestObserve: -observe serves the server's counters while it trains, and
// rrefgen refs, reading the listener, finds the snapshot -forget keeps: owned
// by the server, held by t1, made at trainer.go's Remote (-sites).
func TestObserve(t *testing.T) {
	o := testOptions(2, 200)
	o.observe, o.forget, o.sites = "127.0.0.1:0", true, true
	o.compute, o.shutdownTimeout = time.Millisecond, time.Second
	r, w := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := runLocal(w, o)
		w.Close()
		done <- err
	}()
	lines := bufio.NewScanner(r)
	if !lines.Scan() {
		t.Fatal("runLocal printed nothing")
	}
	var metrics, counters string
	if _, err := fmt.Sscanf(lines.Text(), "server: metrics on %s counters on %s", &metrics, &counters); err != nil {
		t.Fatalf("%q: %v", lines.Text(), err)
	}
	metrics = strings.TrimSuffix(metrics, ",")
	go io.Copy(io.Discard, r)
	// The listener lives until the group closes, after every step and a
	// shutdown that waits for the forgotten snapshot: long enough to ask.
	if body := get(t, metrics); !strings.Contains(body, "rref_messages_total{direction=\"in\",type=\"RemoteCall\"}") {
		t.Errorf("%s has no RemoteCall count:\n%s", metrics, body)
	}
	var info worker.DebugInfo
	if err := json.Unmarshal([]byte(get(t, counters)), &info); err != nil {
		t.Errorf("%s: %v", counters, err)
	}
	listener := strings.TrimSuffix(strings.TrimPrefix(counters, "http://"), "/debug/rref")
	var seen string
	for found := false; !found; {
		select {
		case err := <-done:
			t.Fatalf("the run ended (%v) before rrefgen refs showed t1's forgotten snapshot; last it showed:\n%s", err, seen)
		default:
		}
		var out, errs bytes.Buffer
		if code := cli.Main(&cli.Env{Stdout: &out, Stderr: &errs}, []string{"refs", "-json", listener}); code != 0 {
			t.Fatalf("rrefgen refs %s: exit %d: %s", listener, code, errs.String())
		}
		seen = out.String()
		found = forgottenShown(t, out.Bytes())
	}
	if err := <-done; !errors.Is(err, worker.ErrLeak) {
		t.Errorf("runLocal -forget -observe = %v, want the leak", err)
	}
}

// forgottenShown says whether rrefgen refs -json shows a value the server
// owns, made at trainer.go, with t1 holding a reference to it.
func forgottenShown(t *testing.T, view []byte) bool {
	var v struct {
		Members []struct {
			Name   string `json:"member"`
			Values []struct {
				ID   string `json:"id"`
				Site string `json:"site"`
			} `json:"values"`
			Refs []struct {
				Value string `json:"value"`
			} `json:"references"`
		} `json:"members"`
	}
	if err := json.Unmarshal(view, &v); err != nil {
		t.Fatalf("rrefgen refs -json: %v\n%s", err, view)
	}
	owned := map[string]bool{}
	for _, m := range v.Members {
		for _, val := range m.Values {
			if m.Name == "server" && strings.Contains(val.Site, "trainer.go") {
				owned[val.ID] = true
			}
		}
	}
	for _, m := range v.Members {
		for _, ref := range m.Refs {
			if m.Name == "t1" && owned[ref.Value] {
				return true
			}
		}
	}
	return false
}

func get(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %v %s", url, err, resp.Status)
	}
	return string(body)
}

func testOptions(trainers, steps int) options {
	var o options
	newFlags(&o).Parse(nil)
	o.trainers, o.steps = trainers, steps
	return o
}

// TestProcesses runs the example as its README shows, one process per
// member over tcp on loopback: the server and two trainers.
func TestProcesses(t *testing.T) {
	runProcesses(t, nil, func(port string) string { return "127.0.0.1:" + port })
}

// runProcesses builds the example (with tags) and runs a server and two
// trainers, each member's address made by addr from a free port: every
// trainer finishes, and the server's loss falls.
func runProcesses(t *testing.T, tags []string, addr func(port string) string) {
	const steps = 10
	g := startGroup(t, tags, groupAddrs(t, addr), map[string][]string{}, "-steps", fmt.Sprint(steps))
	for _, name := range members {
		if err := g.wait(name); err != nil {
			t.Errorf("%s: %v\n%s", name, err, g.out(name))
		}
	}
	var before, after float64
	var updates int
	for _, line := range strings.Split(g.out("server"), "\n") {
		fmt.Sscanf(line, "server: loss %g, waiting", &before)
		fmt.Sscanf(line, "server: loss after %d updates: %g", &updates, &after)
	}
	if updates != 2*steps || before == 0 || after >= before {
		t.Errorf("the server's loss went from %g to %g in %d updates:\n%s", before, after, updates, g.out("server"))
	}
	for _, name := range members[1:] {
		if !strings.Contains(g.out(name), fmt.Sprintf("trained %d steps", steps)) {
			t.Errorf("%s did not finish:\n%s", name, g.out(name))
		}
	}
}

// TestTrainerKilled: a trainer killed while it holds a snapshot is found
// dead (at once over shared memory), the server's OnPeerFailed hears of it,
// the snapshot is reclaimed, and the others finish and shut down with
// nothing leaked.
func TestTrainerKilled(t *testing.T) {
	g := startGroup(t, nil, shmAddrs(t), map[string][]string{"t1": {"-crash-after", "3"}})
	if err := g.wait("t1"); err == nil || !strings.Contains(err.Error(), "killed") {
		t.Errorf("t1 ended with %v, want killed\n%s", err, g.out("t1"))
	}
	for _, name := range []string{"server", "t2"} {
		if err := g.wait(name); err != nil {
			t.Errorf("%s: %v\n%s", name, err, g.out(name))
		}
	}
	for _, want := range []string{"server: t1 failed: ", "server: t2 finished", "no parameter snapshot leaked"} {
		if !strings.Contains(g.out("server"), want) {
			t.Errorf("the server does not print %q:\n%s", want, g.out("server"))
		}
	}
	if !strings.Contains(g.out("t2"), "t2: trained 25 steps") {
		t.Errorf("t2 did not finish:\n%s", g.out("t2"))
	}
}

// TestServerKilled: with the server killed, each trainer's next ToHere
// fails with ErrOwnerFailed, or its next update with ErrPeerFailed; it
// says which and exits with status 1.
func TestServerKilled(t *testing.T) {
	g := startGroup(t, nil, shmAddrs(t), map[string][]string{"server": {"-crash-after", "6"}})
	if err := g.wait("server"); err == nil || !strings.Contains(err.Error(), "killed") {
		t.Errorf("the server ended with %v, want killed\n%s", err, g.out("server"))
	}
	for _, name := range members[1:] {
		var exit *exec.ExitError
		if err := g.wait(name); !errors.As(err, &exit) || exit.ExitCode() != 1 {
			t.Errorf("%s ended with %v, want exit status 1\n%s", name, err, g.out(name))
		}
		out := g.out(name)
		if !strings.Contains(out, name+": the server died; the snapshot it owned is gone") && !strings.Contains(out, name+": the server died before it answered") {
			t.Errorf("%s does not say the server died:\n%s", name, out)
		}
	}
}

// members are the example's group in these tests.
var members = []string{"server", "t1", "t2"}

func groupAddrs(t *testing.T, addr func(port string) string) []string {
	ports, err := freeport.Ports(len(members))
	if err != nil {
		t.Fatal(err)
	}
	var peers []string
	for i, name := range members {
		peers = append(peers, name+"="+addr(ports[i]))
	}
	return peers
}

// shmAddrs puts the members on shared memory, under a group name of this
// test's own.
func shmAddrs(t *testing.T) []string {
	var peers []string
	for _, name := range members {
		peers = append(peers, fmt.Sprintf("%s=shm:ps%d%s", name, os.Getpid(), t.Name()))
	}
	return peers
}

// group is the example's members running as processes.
type group struct {
	cmds map[string]*exec.Cmd
	outs map[string]*bytes.Buffer
	errs map[string]error
	done map[string]bool
}

// startGroup builds the example (with tags) and starts its members with
// the flags common to all and each one's own.
func startGroup(t *testing.T, tags []string, peers []string, own map[string][]string, common ...string) *group {
	if testing.Short() {
		t.Skip("builds and starts processes")
	}
	bin := build(t, tags)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	g := &group{cmds: map[string]*exec.Cmd{}, outs: map[string]*bytes.Buffer{}, errs: map[string]error{}, done: map[string]bool{}}
	for _, name := range members {
		args := append([]string{"-name", name, "-peers", strings.Join(peers, ",")}, common...)
		cmd := exec.CommandContext(ctx, bin, append(args, own[name]...)...)
		g.outs[name] = new(bytes.Buffer)
		cmd.Stdout, cmd.Stderr = g.outs[name], g.outs[name]
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		g.cmds[name] = cmd
	}
	t.Cleanup(func() {
		for _, name := range members {
			g.wait(name)
		}
		cancel()
	})
	return g
}

// wait waits for a member's process and returns how it ended.
func (g *group) wait(name string) error {
	if !g.done[name] {
		g.errs[name], g.done[name] = g.cmds[name].Wait(), true
	}
	return g.errs[name]
}

// out is what a member printed; wait for it first.
func (g *group) out(name string) string { return g.outs[name].String() }

var builds sync.Map // tags -> *built

type built struct {
	once sync.Once
	bin  string
	err  error
	out  []byte
}

// build compiles the example once per set of tags for the whole run.
func build(t *testing.T, tags []string) string {
	v, _ := builds.LoadOrStore(strings.Join(tags, " "), new(built))
	b := v.(*built)
	b.once.Do(func() {
		dir, err := os.MkdirTemp("", "paramserver")
		if err != nil {
			b.err = err
			return
		}
		b.bin = filepath.Join(dir, "paramserver")
		b.out, b.err = exec.Command("go", append(append([]string{"build"}, tags...), "-o", b.bin, ".")...).CombinedOutput()
	})
	if b.err != nil {
		t.Fatalf("go build: %v\n%s", b.err, b.out)
	}
	return b.bin
}

// TestMain removes the binaries build made.
func TestMain(m *testing.M) {
	code := m.Run()
	builds.Range(func(_, v any) bool {
		if b := v.(*built); b.bin != "" {
			os.RemoveAll(filepath.Dir(b.bin))
		}
		return true
	})
	os.Exit(code)
}
