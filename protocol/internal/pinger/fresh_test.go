package pinger

import (
	"os"
	"testing"

	"github.com/rrefkit/rref/gen"
	"github.com/rrefkit/rref/internal/cli"
	"github.com/rrefkit/rref/spec"
)

// TestGeneratedIsFresh fails when pingpb is not what rrefgen makes of its
// spec today (run go generate ./protocol/internal/pingpb).
func TestGeneratedIsFresh(t *testing.T) {
	src, err := os.ReadFile("../pingpb/ping.rspec")
	if err != nil {
		t.Fatal(err)
	}
	p, err := spec.Parse("ping.rspec", src) // as go generate names it, from its folder
	if err != nil {
		t.Fatal(err)
	}
	files, err := gen.Generate(p, "github.com/rrefkit/rref/protocol/internal/pingpb")
	if err != nil {
		t.Fatal(err)
	}
	diffs, err := cli.Stale("../pingpb", files)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range diffs {
		t.Error(d)
	}
}
