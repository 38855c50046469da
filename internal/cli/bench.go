package cli

import (
	"fmt"
	"time"

	"github.com/rrefkit/rref/internal/bench"
)

func init() {
	register(command{"bench", "measure transports side by side with their peers (bench fifo)", runBench})
}

func runBench(env *Env, args []string) int {
	fs := newFlags(env, "bench", "fifo [-format text|csv|json] [-d DURATION]", `
Measures in one run, on this machine: the FIFO transport over shm, tcp and mem
beside Unix domain sockets, TCP loopback and a Go channel, plus the machine's
floors (a cache-line ping-pong between two threads, memcpy). Each row shows
its ratios to the floor and to Unix sockets. Timings swing between runs on
shared hosts: read the ratios, not the absolute numbers.`)
	format := fs.String("format", "text", "text, csv or json")
	d := fs.Duration("d", 200*time.Millisecond, "time per measured cell")
	if len(args) == 0 || args[0] != "fifo" {
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
	rows := bench.FIFOTable(*d, progress)
	if isTerminal(env.Stderr) {
		fmt.Fprintf(env.Stderr, "\r%-60s\r", "")
	}
	if err := bench.Write(env.Stdout, rows, *format); err != nil {
		fmt.Fprintln(env.Stderr, err)
		return ExitFail
	}
	return ExitOK
}
