package main

import (
	"fmt"
	"time"

	"github.com/rrefkit/rref/examples/dgc/dgcpb"
	"github.com/rrefkit/rref/protocol"
	"github.com/rrefkit/rref/protocol/world"
)

// The lease's timing: a client renews renew after each grant, and a call
// or its answer takes at most maxDelay, so the owner hears a renewal within
// renew + 2*maxDelay of the last, inside the lease. The clock passes by
// ticks between events, so a message may take any whole number of ticks.
const (
	lease    = 4 * time.Second
	renew    = time.Second
	maxDelay = time.Second
	tick     = time.Second
)

const owner protocol.NodeID = "owner"

func clientName(i int) protocol.NodeID { return protocol.NodeID(fmt.Sprintf("c%d", i+1)) }

// worldConfig is the owner and clients, each taking the object rounds
// times, over an unordered network with a delivery bound. The clients are
// interchangeable: the search keeps one state of each class alike but
// for their names.
func worldConfig(clients, rounds int, unsafe bool) world.Config {
	nodes := []world.Node{{Name: owner, Role: dgcpb.OwnerRole(func() dgcpb.OwnerHandler { return NewOwner(lease, clients, unsafe) })}}
	var group []protocol.NodeID
	for i := range clients {
		group = append(group, clientName(i))
		nodes = append(nodes, world.Node{Name: clientName(i), Role: dgcpb.ClientRole(func() dgcpb.ClientHandler {
			return &Client{Owner: owner, Renew: renew, Rounds: rounds}
		})})
	}
	return world.Config{
		Network:    world.Network{MaxDelay: maxDelay},
		Tick:       tick,
		Nodes:      nodes,
		Invariants: []world.Check{{Name: dgcpb.InvariantSafe, Check: safe}},
		Symmetric:  [][]protocol.NodeID{group},
	}
}

// safe: no client holds the object once the owner collected it.
func safe(w *world.World) error {
	o, _ := w.Node(owner)
	if st := dgcpb.OwnerState(o.State); st != dgcpb.OwnerCollected && st != dgcpb.OwnerClosed {
		return nil
	}
	for _, n := range w.Nodes()[1:] {
		if dgcpb.ClientState(n.State) == dgcpb.ClientHolding {
			return fmt.Errorf("%s holds a reference to the collected object", n.Name)
		}
	}
	return nil
}
