package main

import (
	"fmt"

	"github.com/rrefkit/rref/examples/ownership/ownpb"
	"github.com/rrefkit/rref/protocol"
	"github.com/rrefkit/rref/protocol/world"
)

const owner protocol.NodeID = "owner"

func borrowerName(i int) protocol.NodeID { return protocol.NodeID(fmt.Sprintf("b%d", i+1)) }

// borrowerOf is borrower i of n, which passes its reference to the next.
func borrowerOf(i, n int, silent bool) *Borrower {
	b := &Borrower{Owner: owner, Silent: silent}
	if i+1 < n {
		b.Next = borrowerName(i + 1)
	}
	return b
}

// worldConfig is the owner lending to the first of a chain of n
// borrowers, over an unordered network.
func worldConfig(n int, silent bool) world.Config {
	nodes := []world.Node{{Name: owner, Role: ownpb.OwnerRole(func() ownpb.OwnerHandler { return NewOwner(borrowerName(0)) })}}
	for i := range n {
		nodes = append(nodes, world.Node{Name: borrowerName(i), Role: ownpb.BorrowerRole(func() ownpb.BorrowerHandler { return borrowerOf(i, n, silent) })})
	}
	return world.Config{Nodes: nodes, Invariants: []world.Check{{Name: ownpb.InvariantNoUseAfterFree, Check: noUseAfterFree}}}
}

// noUseAfterFree: once the owner freed the value, no borrower holds a
// reference and none is on its way.
func noUseAfterFree(w *world.World) error {
	if o, _ := w.Node(owner); ownpb.OwnerState(o.State) != ownpb.OwnerFreed {
		return nil
	}
	for _, n := range w.Nodes()[1:] {
		if st := ownpb.BorrowerState(n.State); st == ownpb.BorrowerHolding || st == ownpb.BorrowerPassing {
			return fmt.Errorf("%s is %s a freed value", n.Name, st)
		}
	}
	for _, e := range w.InFlight() {
		if _, ok := e.Message.(*ownpb.Lend); ok {
			return fmt.Errorf("a reference to a freed value is on its way to %s", e.To)
		}
	}
	return nil
}

// freedAtEnd: a run that ends has freed the value (nothing leaked).
func freedAtEnd(w *world.World) error {
	if o, _ := w.Node(owner); ownpb.OwnerState(o.State) != ownpb.OwnerFreed {
		return fmt.Errorf("the owner ended %s", ownpb.OwnerState(o.State))
	}
	return nil
}
