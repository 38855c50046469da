package main

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rrefkit/rref/internal/freeport"
)

// procTimeout bounds the group's run, the coordinator's restart included.
const procTimeout = 2 * time.Minute

// TestCoordinatorCrashOverTCP runs the coordinator and two participants
// as processes over tcp; the coordinator exits once it logged its commit,
// before telling anyone, and is started again on its log: it sends the
// decision again, and both participants commit.
func TestCoordinatorCrashOverTCP(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs four processes")
	}
	ctx, cancel := context.WithTimeout(context.Background(), procTimeout)
	defer cancel()
	dir := t.TempDir()
	bin := filepath.Join(dir, "twophase")
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	names := []string{"coord", "p1", "p2"}
	addrs, err := freeport.Loopback(len(names))
	if err != nil {
		t.Fatal(err)
	}
	var peers []string
	for i, n := range names {
		peers = append(peers, n+"="+addrs[i])
	}
	run := func(args ...string) (*exec.Cmd, *bytes.Buffer) {
		var out bytes.Buffer
		c := exec.CommandContext(ctx, bin, append(args, "-peers", strings.Join(peers, ","))...)
		c.Stdout, c.Stderr = &out, &out
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		return c, &out
	}
	log := filepath.Join(dir, "coord.log")
	coord, cout := run("-node", "coord", "-state", log, "-crash-after-decision")
	p1, out1 := run("-node", "p1")
	p2, out2 := run("-node", "p2")
	var exit *exec.ExitError
	if err := coord.Wait(); !errors.As(err, &exit) || exit.ExitCode() != exitCrashed {
		t.Fatalf("the coordinator: %v, want exit status %d\n%s", err, exitCrashed, cout)
	}
	coord, cout = run("-node", "coord", "-state", log)
	for _, p := range []struct {
		name string
		cmd  *exec.Cmd
		out  *bytes.Buffer
	}{{"coord", coord, cout}, {"p1", p1, out1}, {"p2", p2, out2}} {
		if err := p.cmd.Wait(); err != nil {
			t.Errorf("%s: %v\n%s", p.name, err, p.out)
		}
	}
	for _, want := range []struct {
		out  *bytes.Buffer
		line string
	}{{cout, "coord done"}, {out1, "p1 committed"}, {out2, "p2 committed"}} {
		if !strings.Contains(want.out.String(), want.line) {
			t.Errorf("want %q in:\n%s", want.line, want.out)
		}
	}
}
