// Command ownership is ownership with borrowers (own.rspec), its handlers
// written once (handlers.go): with no flags it explores them (borrowers
// that tell the owner before passing a reference on, then ones that pass
// it silently); with -node it runs one node of a group over tcp.
//
//	go run ./examples/ownership
//	go run ./examples/ownership -node owner -peers owner=127.0.0.1:7000,b1=127.0.0.1:7001,b2=127.0.0.1:7002
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/rrefkit/rref/examples/ownership/ownpb"
	"github.com/rrefkit/rref/explore"
	"github.com/rrefkit/rref/protocol"
	"github.com/rrefkit/rref/protocol/node"
	"github.com/rrefkit/rref/protocol/world"
)

// pollEvery is how often a program looks at its node's state.
const pollEvery = 10 * time.Millisecond

func main() {
	name := flag.String("node", "", "run this node of the group (owner, b1, b2, ...) instead of exploring")
	peers := flag.String("peers", "", "the group: name=host:port,...; borrowers pass in the order listed (with -node)")
	flag.Parse()
	if *name != "" {
		if err := runNode(protocol.NodeID(*name), *peers); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}
	failed := false
	for _, v := range []struct {
		title  string
		silent bool
	}{{"borrowers telling the owner", false}, {"a borrower passing silently", true}} {
		start, err := world.Start(worldConfig(3, v.silent))
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		r := explore.Explore(start, explore.Options{})
		fmt.Printf("%-30s %6d states  ", v.title, r.States)
		if r.Passed() {
			fmt.Println("ok")
		} else {
			fmt.Printf("FAIL %v (replay: %s)\n", r.Violation, r.ScheduleString())
			for i, s := range r.Trace {
				fmt.Printf("    %2d  %s\n", i+1, s)
			}
		}
		failed = failed || r.Passed() == v.silent
	}
	if failed {
		os.Exit(1)
	}
}

// runNode runs one node: the owner drops its own reference at once and
// waits to free the value; a borrower waits for its reference, passes it
// to the next, and returns it.
func runNode(name protocol.NodeID, peerList string) error {
	ps, err := node.ParsePeers(peerList)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cfg := node.Config{Name: name, Peers: ps, Secret: []byte("ownership example")}
	if name == owner {
		n, err := node.Start(ctx, cfg, ownpb.OwnerRole(func() ownpb.OwnerHandler { return NewOwner(ps[1].Name) }))
		if err != nil {
			return err
		}
		defer n.Close()
		if err := node.Input(ctx, n, ownpb.OwnerOnDrop); err != nil {
			return err
		}
		return await(ctx, n, "freed", func(s int, _ any) bool { return s == int(ownpb.OwnerFreed) })
	}
	b := &Borrower{Owner: owner}
	for i, p := range ps[:len(ps)-1] {
		if p.Name == name {
			b.Next = ps[i+1].Name
		}
	}
	n, err := node.Start(ctx, cfg, ownpb.BorrowerRole(func() ownpb.BorrowerHandler { b := *b; return &b }))
	if err != nil {
		return err
	}
	defer n.Close()
	holding := func(s int, _ any) bool { return s == int(ownpb.BorrowerHolding) }
	if err := await(ctx, n, "holding", holding); err != nil {
		return err
	}
	if b.Next != "" {
		if err := node.Input(ctx, n, ownpb.BorrowerOnPass); err != nil {
			return err
		}
		passed := func(s int, h any) bool { return holding(s, h) && h.(*Borrower).Passed }
		if err := await(ctx, n, "passed", passed); err != nil {
			return err
		}
	}
	if err := node.Input(ctx, n, ownpb.BorrowerOnReturn); err != nil {
		return err
	}
	fmt.Println(name, "returned")
	return nil
}

// await waits until node n's state and handler satisfy done.
func await(ctx context.Context, n *node.Node, what string, done func(state int, h any) bool) error {
	for {
		var ok bool
		if err := n.Inspect(ctx, func(s int, h any) { ok = done(s, h) }); err != nil {
			return err
		}
		if ok {
			fmt.Println(n.Self(), what)
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: not %s: %w", n.Self(), what, ctx.Err())
		case <-n.Done():
			return n.Err()
		case <-time.After(pollEvery):
		}
	}
}
