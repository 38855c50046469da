package main

import (
	"testing"

	"github.com/rrefkit/rref/gen"
	"github.com/rrefkit/rref/internal/cli"
	"github.com/rrefkit/rref/spec"
)

// TestGeneratedIsFresh fails when tpcpb is not what rrefgen makes of
// tpc.rspec today (run go generate ./examples/twophase).
func TestGeneratedIsFresh(t *testing.T) {
	p, err := spec.ParseFile("tpc.rspec")
	if err != nil {
		t.Fatal(err)
	}
	files, err := gen.Generate(p, "github.com/rrefkit/rref/examples/twophase/tpcpb")
	if err != nil {
		t.Fatal(err)
	}
	diffs, err := cli.Stale("tpcpb", files)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range diffs {
		t.Error(d)
	}
}
