// Command dgc is a lease-based distributed garbage collector (dgc.rspec),
// its handlers written once (handlers.go): with no flags it explores them
// (the correct owner, then one that does not check sequence numbers);
// with -node it runs one node of a group over tcp, with real timers.
//
//	go run ./examples/dgc
//	go run ./examples/dgc -node owner -peers owner=127.0.0.1:7000,c1=127.0.0.1:7001
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/rrefkit/rref/examples/dgc/dgcpb"
	"github.com/rrefkit/rref/explore"
	"github.com/rrefkit/rref/protocol"
	"github.com/rrefkit/rref/protocol/node"
	"github.com/rrefkit/rref/protocol/world"
)

// The real run's timing: renewals every realRenew, leases of realLease.
const (
	realRenew = 50 * time.Millisecond
	realLease = 8 * realRenew
)

func main() {
	name := flag.String("node", "", "run this node of the group (owner, c1, c2, ...) instead of exploring")
	peers := flag.String("peers", "", "the group: name=host:port,... (with -node)")
	hold := flag.Duration("hold", 4*realLease, "how long a client holds the object (with -node)")
	flag.Parse()
	if *name != "" {
		if err := runNode(protocol.NodeID(*name), *peers, *hold); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}
	failed := false
	for _, v := range []struct {
		title  string
		unsafe bool
	}{{"owner checking sequence numbers", false}, {"owner ignoring them", true}} {
		start, err := world.Start(worldConfig(1, 2, v.unsafe))
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		r := explore.Explore(start, explore.Options{})
		fmt.Printf("%-34s %6d states  ", v.title, r.States)
		if r.Passed() {
			fmt.Println("ok")
		} else {
			fmt.Printf("FAIL %v (replay: %s)\n", r.Violation, r.ScheduleString())
			for i, s := range r.Trace {
				fmt.Printf("    %2d  %s\n", i+1, s)
			}
		}
		failed = failed || r.Passed() == v.unsafe
	}
	if failed {
		os.Exit(1)
	}
}

// runNode runs one node until its machine ends: the owner unexports the
// object at once and closes once every client said bye; a client takes
// it, holds it (renewing its lease) for hold, drops it and says bye.
func runNode(name protocol.NodeID, peerList string, hold time.Duration) error {
	ps, err := node.ParsePeers(peerList)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cfg := node.Config{Name: name, Peers: ps, Secret: []byte("dgc example")}
	var role *protocol.Role
	if name == owner {
		role = dgcpb.OwnerRole(func() dgcpb.OwnerHandler { return NewOwner(realLease, len(ps)-1, false) })
	} else {
		role = dgcpb.ClientRole(func() dgcpb.ClientHandler { return &Client{Owner: owner, Renew: realRenew, Rounds: 1} })
	}
	n, err := node.Start(ctx, cfg, role)
	if err != nil {
		return err
	}
	defer n.Close()
	if name == owner {
		// Unexport once every client holds it: their leases keep it.
		if err := await(ctx, n, "held", func(_ int, h any) bool { return len(h.(*Owner).Holders) == len(ps)-1 }); err != nil {
			return err
		}
		if err := node.Input(ctx, n, dgcpb.OwnerOnUnexport); err != nil {
			return err
		}
		return await(ctx, n, "closed", inState(dgcpb.OwnerClosed))
	}
	if err := node.Input(ctx, n, dgcpb.ClientOnTake); err != nil {
		return err
	}
	if err := await(ctx, n, "holding", inState(dgcpb.ClientHolding)); err != nil {
		return err
	}
	select { // the lease is renewed meanwhile; a lease that ran out would stop the node
	case <-time.After(hold):
	case <-n.Done():
		return n.Err()
	}
	for _, e := range []dgcpb.ClientEvent{dgcpb.ClientOnDrop, dgcpb.ClientOnFinish} {
		if err := node.Input(ctx, n, e); err != nil {
			return err
		}
	}
	fmt.Println(name, "dropped after holding", hold)
	return nil
}

func inState[S dgcpb.OwnerState | dgcpb.ClientState](want S) func(int, any) bool {
	return func(s int, _ any) bool { return s == int(want) }
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
		case <-time.After(realRenew / 5):
		}
	}
}
