package cli

import (
	"fmt"
	"strings"
	"time"

	"github.com/rrefkit/rref/internal/bench"
)

func init() {
	register(command{"bench", "measure transports side by side with their peers (bench fifo)", runBench})
}

func runBench(env *Env, args []string) int {
	fs := newFlags(env, "bench", "fifo|rpc [-format text|csv|json] [-d DURATION]", `
bench fifo measures in one run, on this machine: the FIFO transport over shm,
tcp and mem beside Unix domain sockets, TCP loopback and a Go channel, plus the
machine's floors (a cache-line ping-pong between two processes, the same
over two rings of lines, memcpy). Each
row shows its ratios to the floor and to Unix sockets.

bench rpc measures Call round trip and throughput (1 and 16 callers) and
Remote plus ToHere over shm, tcp and mem, beside net/rpc on loopback and,
in a binary built with -tags rrefgrpc (go run -tags rrefgrpc ./cmd/rrefgen
bench rpc), gRPC-Go unary calls, with each round trip's ratio to gRPC's.

Timings swing between runs on shared hosts: read the ratios.`)
	format := fs.String("format", "text", "text, csv or json")
	d := fs.Duration("d", 200*time.Millisecond, "time per measured cell")
	if len(args) == 0 || (args[0] != "fifo" && args[0] != "rpc") {
		// -h, or a bad first word: parseFlags prints the help (on stdout
		// for -h, exit 0) or says what is wrong.
		if len(args) > 0 && strings.HasPrefix(args[0], "-") {
			if st := parseFlags(env, fs, args); st >= 0 {
				return st
			}
		}
		if len(args) > 0 {
			fmt.Fprintf(env.Stderr, "rrefgen bench: %q: name what to measure: fifo or rpc\n", args[0])
		} else {
			fmt.Fprintln(env.Stderr, "rrefgen bench: name what to measure: fifo or rpc")
		}
		fs.SetOutput(env.Stderr)
		fs.Usage()
		return ExitUsage
	}
	if st := parseFlags(env, fs, args[1:]); st >= 0 {
		return st
	}
	if *format != "text" && *format != "csv" && *format != "json" {
		fmt.Fprintf(env.Stderr, "rrefgen bench: unknown -format %q\n", *format)
		return ExitUsage
	}
	progress := func(s string) {
		if isTerminal(env.Stderr) {
			fmt.Fprintf(env.Stderr, "\r%-60s", s)
		}
	}
	var err error
	if args[0] == "rpc" {
		rows := bench.RPCTable(*d, progress)
		clearProgress(env)
		err = bench.WriteRPC(env.Stdout, rows, *format)
	} else {
		rows := bench.FIFOTable(*d, progress)
		clearProgress(env)
		err = bench.Write(env.Stdout, rows, *format)
	}
	if err != nil {
		fmt.Fprintln(env.Stderr, err)
		return ExitFail
	}
	return ExitOK
}

func clearProgress(env *Env) {
	if isTerminal(env.Stderr) {
		fmt.Fprintf(env.Stderr, "\r%-60s\r", "")
	}
}
