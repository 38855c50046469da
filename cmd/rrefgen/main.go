// Command rrefgen generates Go from protocol specs, checks them, draws their
// machines, runs the conformance suite and the benchmarks. See README.md.
package main

import (
	"os"

	"github.com/rrefkit/rref/internal/cli"
)

func main() {
	os.Exit(cli.Main(&cli.Env{Stdout: os.Stdout, Stderr: os.Stderr}, os.Args[1:]))
}
