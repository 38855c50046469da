// Command lockcheck explores a protocol that is not RRef with rrefkit's
// engine: a lock service with fencing tokens, declared in lock.rspec and
// generated into lockpb by rrefgen (codecs, state machines, handler
// interfaces, invariant names). handlers.go writes the client and the
// server against the generated interfaces, model.go puts them in a world
// (package protocol/world, an explore.Model derived from them) with the
// checks; explore.Explore then runs every order of their steps, with lost
// order and resent messages, and checks mutual exclusion, fencing and
// progress.
//
//	go run ./examples/lockcheck                       # the correct protocol, then two seeded bugs
//	go run ./examples/lockcheck -clients 3 -rounds 2 -resends 2
//	go run ./examples/lockcheck -coverage                 # and which spec transitions each search took
//
// The clients are declared interchangeable (model.go): the search keeps one
// state of each class of states that differ only in which client is which;
// -no-symmetry explores every state, to compare.
//
// To start a protocol of your own: write its spec (spec/README.md), run
// `rrefgen gen -out DIR -pkg PATH your.rspec`, and write handlers and a
// world like these (docs/tutorial.md, docs/handlers.md).
package main

//go:generate go run ../../cmd/rrefgen gen -out lockpb -pkg github.com/rrefkit/rref/examples/lockcheck/lockpb lock.rspec

import (
	"flag"
	"fmt"
	"os"

	"github.com/rrefkit/rref/explore"
	"github.com/rrefkit/rref/protocol/world"
)

func main() {
	clients := flag.Int("clients", 3, "clients competing for the lock")
	rounds := flag.Int("rounds", 1, "times each client takes the lock")
	resends := flag.Int("resends", 1, "messages the network may deliver twice")
	coverage := flag.Bool("coverage", false, "report which of the spec's transitions each search took")
	noSymmetry := flag.Bool("no-symmetry", false, "explore every state, not one of each class of states alike but for the clients' names")
	flag.Parse()
	failed := false
	for _, v := range []struct {
		name string
		cfg  Config
		want bool // whether it should pass
	}{
		{"correct server", Config{}, true},
		{"server that forgets requests", Config{Forgetful: true}, false},
		{"server that trusts any release", Config{Trusting: true}, false},
	} {
		cfg := v.cfg
		cfg.Clients, cfg.Rounds, cfg.Resends = *clients, *rounds, *resends
		start, err := world.Start(worldConfig(cfg))
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		opt := explore.Options{Workers: -1, Coverage: *coverage, NoSymmetry: *noSymmetry, NoSleepSets: *noSymmetry} // sleep sets stop schedules being counted: compare like with like
		r := explore.Explore(start, opt)
		fmt.Printf("%-32s %8d states %12.0f schedules  %v  ", v.name, r.States, r.Schedules, r.Duration.Round(1e6))
		switch {
		case r.Truncated != "":
			fmt.Println("INCOMPLETE:", r.Truncated)
			failed = true
		case r.Passed():
			fmt.Println("ok")
		default:
			fmt.Println("FAIL", r.Violation)
			for i, step := range r.Trace {
				fmt.Printf("    %2d  %s\n", i+1, step)
			}
			if r.NotShortest != "" {
				fmt.Println("    not known to be the shortest failing schedule:", r.NotShortest)
			}
		}
		if r.Coverage != nil {
			fmt.Print(r.Coverage.Report())
		}
		if r.Passed() != v.want {
			failed = true
		}
	}
	if failed {
		os.Exit(1)
	}
}
