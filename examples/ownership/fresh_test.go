package main

import (
	"testing"

	"github.com/rrefkit/rref/gen"
	"github.com/rrefkit/rref/internal/cli"
	"github.com/rrefkit/rref/spec"
)

// TestGeneratedIsFresh fails when ownpb is not what rrefgen makes of
// own.rspec today (run go generate ./examples/ownership).
func TestGeneratedIsFresh(t *testing.T) {
	p, err := spec.ParseFile("own.rspec")
	if err != nil {
		t.Fatal(err)
	}
	files, err := gen.Generate(p, "github.com/rrefkit/rref/examples/ownership/ownpb")
	if err != nil {
		t.Fatal(err)
	}
	diffs, err := cli.Stale("ownpb", files)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range diffs {
		t.Error(d)
	}
}
