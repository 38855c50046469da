package main

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rrefkit/rref/internal/freeport"
)

// procTimeout bounds the group's run: its clients hold the object for
// well under a second.
const procTimeout = 2 * time.Minute

// TestProcessesOverTCP runs the owner and two clients as processes of
// this program over tcp: each client holds the object for several leases
// (renewing it), so an owner that collected early would answer a renewal
// with Gone, which no client in holding accepts (its node would stop);
// every process ends, the owner closed.
func TestProcessesOverTCP(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs three processes")
	}
	ctx, cancel := context.WithTimeout(context.Background(), procTimeout)
	defer cancel()
	bin := filepath.Join(t.TempDir(), "dgc")
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	names := []string{"owner", "c1", "c2"}
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
	if !strings.Contains(outs[0].String(), "owner closed") {
		t.Errorf("owner: %s", outs[0].String())
	}
	for i := 1; i < len(names); i++ {
		if want := fmt.Sprintf("%s dropped", names[i]); !strings.Contains(outs[i].String(), want) {
			t.Errorf("%s: %s", names[i], outs[i].String())
		}
	}
}
