package main

import (
	"testing"

	"github.com/rrefkit/rref/gen"
	"github.com/rrefkit/rref/internal/cli"
	"github.com/rrefkit/rref/spec"
)

// TestGeneratedIsFresh fails when dgcpb is not what rrefgen makes of
// dgc.rspec today (run go generate ./examples/dgc).
func TestGeneratedIsFresh(t *testing.T) {
	p, err := spec.ParseFile("dgc.rspec")
	if err != nil {
		t.Fatal(err)
	}
	files, err := gen.Generate(p, "github.com/rrefkit/rref/examples/dgc/dgcpb")
	if err != nil {
		t.Fatal(err)
	}
	diffs, err := cli.Stale("dgcpb", files)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range diffs {
		t.Error(d)
	}
}
