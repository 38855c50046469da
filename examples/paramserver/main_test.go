package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Two trainers update asynchronously from snapshots that may be stale, so
// how far the loss falls in 40 updates depends on the interleaving: the
// test asks for a fall of over three orders of magnitude, not an exact one.
func TestLocalTraining(t *testing.T) {
	var out bytes.Buffer
	if err := runLocal(&out, 2, 20); err != nil {
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

// TestProcesses runs the example as its README shows, one process per
// member over tcp on loopback: the server and two trainers.
func TestProcesses(t *testing.T) {
	runProcesses(t, nil, func(port string) string { return "127.0.0.1:" + port })
}

// runProcesses builds the example (with tags) and runs a server and two
// trainers, each member's address made by addr from a free port: every
// trainer finishes, and the server's loss falls.
func runProcesses(t *testing.T, tags []string, addr func(port string) string) {
	if testing.Short() {
		t.Skip("builds and starts processes")
	}
	bin := filepath.Join(t.TempDir(), "paramserver")
	build := exec.Command("go", append(append([]string{"build"}, tags...), "-o", bin, ".")...)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	var peers []string
	for _, name := range []string{"server", "t1", "t2"} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		_, port, _ := net.SplitHostPort(ln.Addr().String())
		ln.Close()
		peers = append(peers, name+"="+addr(port))
	}
	const steps = 10
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	outs := make([]bytes.Buffer, 3)
	cmds := make([]*exec.Cmd, 3)
	for i, name := range []string{"server", "t1", "t2"} {
		cmds[i] = exec.CommandContext(ctx, bin, "-name", name, "-peers", strings.Join(peers, ","), "-steps", fmt.Sprint(steps))
		cmds[i].Stdout, cmds[i].Stderr = &outs[i], &outs[i]
		if err := cmds[i].Start(); err != nil {
			t.Fatal(err)
		}
	}
	for i, c := range cmds {
		if err := c.Wait(); err != nil {
			t.Errorf("%s: %v\n%s", peers[i], err, outs[i].String())
		}
	}
	var before, after float64
	var updates int
	for _, line := range strings.Split(outs[0].String(), "\n") {
		fmt.Sscanf(line, "server: loss %g, waiting", &before)
		fmt.Sscanf(line, "server: loss after %d updates: %g", &updates, &after)
	}
	if updates != 2*steps || before == 0 || after >= before {
		t.Errorf("the server's loss went from %g to %g in %d updates:\n%s", before, after, updates, outs[0].String())
	}
	for i := 1; i < 3; i++ {
		if !strings.Contains(outs[i].String(), fmt.Sprintf("trained %d steps", steps)) {
			t.Errorf("%s did not finish:\n%s", peers[i], outs[i].String())
		}
	}
}
