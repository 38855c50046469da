// Command rrefgen generates Go from protocol specs, checks them, draws their
// machines, runs the conformance suite and the benchmarks. docs/cli.md
// documents every command.
package main

import (
	"os"

	"github.com/rrefkit/rref/internal/bench"
	"github.com/rrefkit/rref/internal/cli"
)

func main() {
	if bench.ServeChild() { // rrefgen bench rpc runs its shm server as a second rrefgen
		return
	}
	os.Exit(cli.Main(&cli.Env{Stdout: os.Stdout, Stderr: os.Stderr}, os.Args[1:]))
}
