package cli

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/rrefkit/rref/internal/bench"
)

func init() {
	register(command{"bench", "measure transports and calls side by side with their peers (bench fifo, bench rpc)", runBench})
}

// minCellTime is the shortest -d: a cell shorter than a millisecond times a
// handful of round trips, less than one scheduler tick, and a zero or
// negative one measures nothing (it printed -9223372036854776.00).
const minCellTime = time.Millisecond

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
	only := fs.String("only", "", "rpc: measure only the systems whose names contain this (e.g. \"2 procs\", tcp)")
	cells := fs.String("cells", "", "rpc: measure only these cells, comma-separated: "+strings.Join(bench.RPCCells, ", ")+" (default all)")
	cpuProfile := fs.String("cpuprofile", "", "rpc: write this process's CPU profile to FILE and, for a two-process system, the server's to FILE.server")
	if len(args) == 0 || (args[0] != "fifo" && args[0] != "rpc") {
		// -h, or a bad first word: parseFlags prints the help (on stdout
		// for -h, exit 0) or says what is wrong.
		if len(args) > 0 && strings.HasPrefix(args[0], "-") {
			if st := parseFlags(env, fs, args); st >= 0 {
				return st
			}
		}
		if len(args) > 0 {
			return usageError(env, "bench", "%q: name what to measure: fifo or rpc", args[0])
		}
		return usageError(env, "bench", "name what to measure: fifo or rpc")
	}
	if st := parseFlags(env, fs, args[1:]); st >= 0 {
		return st
	}
	if *d < minCellTime {
		return usageError(env, "bench", "-d %v: want at least %v per cell", *d, minCellTime)
	}
	if *format != "text" && *format != "csv" && *format != "json" {
		return usageError(env, "bench", "unknown -format %q", *format)
	}
	progress := func(s string) {
		if isTerminal(env.Stderr) {
			fmt.Fprintf(env.Stderr, "\r%-60s", s)
		}
	}
	var err error
	if args[0] != "rpc" && (*only != "" || *cpuProfile != "" || *cells != "") {
		return usageError(env, "bench", "-only, -cells and -cpuprofile apply to bench rpc")
	}
	if args[0] == "rpc" {
		var cellSet map[string]bool
		if *cells != "" {
			cellSet = map[string]bool{}
			for _, c := range strings.Split(*cells, ",") {
				c = strings.TrimSpace(c)
				if !slices.Contains(bench.RPCCells, c) {
					return usageError(env, "bench", "-cells: unknown cell %q (want some of %s)", c, strings.Join(bench.RPCCells, ", "))
				}
				cellSet[c] = true
			}
		}
		if *cpuProfile != "" {
			stop, err := bench.StartCPUProfile(*cpuProfile)
			if err != nil {
				return failed(env, "bench", err)
			}
			defer stop()
		}
		opt := bench.RPCOptions{Only: func(name string) bool { return strings.Contains(strings.ToLower(name), strings.ToLower(*only)) }, Cells: cellSet}
		if *cpuProfile != "" {
			opt.ServerCPUProfile = *cpuProfile + ".server"
		}
		rows := bench.RPCTableOf(*d, progress, opt)
		clearProgress(env)
		if len(rows) == 0 {
			return usageError(env, "bench", "-only %q names none of the systems", *only)
		}
		err = bench.WriteRPC(env.Stdout, rows, *format)
	} else {
		rows := bench.FIFOTable(*d, progress)
		clearProgress(env)
		err = bench.Write(env.Stdout, rows, *format)
	}
	if err != nil {
		return failed(env, "bench", err)
	}
	return ExitOK
}

func clearProgress(env *Env) {
	if isTerminal(env.Stderr) {
		fmt.Fprintf(env.Stderr, "\r%-60s\r", "")
	}
}
