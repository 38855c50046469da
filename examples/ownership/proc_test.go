package main

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rrefkit/rref/internal/freeport"
)

// procTimeout bounds the group's run.
const procTimeout = 2 * time.Minute

// TestProcessesOverTCP runs the owner and a chain of three borrowers as
// processes over tcp: each borrower passes the reference on and returns
// its own, and the owner frees the value only after the last returns.
func TestProcessesOverTCP(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs four processes")
	}
	ctx, cancel := context.WithTimeout(context.Background(), procTimeout)
	defer cancel()
	bin := filepath.Join(t.TempDir(), "ownership")
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	names := []string{"owner", "b1", "b2", "b3"}
	addrs, err := freeport.Loopback(len(names))
	if err != nil {
		t.Fatal(err)
	}
	var peers []string
	for i, n := range names {
		peers = append(peers, n+"="+addrs[i])
	}
	outs := make([]bytes.Buffer, len(names))
	cmds := make([]*exec.Cmd, len(names))
	for i, n := range names {
		cmds[i] = exec.CommandContext(ctx, bin, "-node", n, "-peers", strings.Join(peers, ","))
		cmds[i].Stdout, cmds[i].Stderr = &outs[i], &outs[i]
		if err := cmds[i].Start(); err != nil {
			t.Fatal(err)
		}
	}
	for i, c := range cmds {
		if err := c.Wait(); err != nil {
			t.Errorf("%s: %v\n%s", names[i], err, outs[i].String())
		}
	}
	want := []string{"owner freed", "b1 passed", "b2 passed", "b3 returned"}
	for i, w := range want {
		if !strings.Contains(outs[i].String(), w) {
			t.Errorf("want %q in %s's output:\n%s", w, names[i], outs[i].String())
		}
	}
}
