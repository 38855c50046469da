package main

import (
	"fmt"

	"github.com/rrefkit/rref/examples/twophase/tpcpb"
	"github.com/rrefkit/rref/protocol"
	"github.com/rrefkit/rref/protocol/world"
)

const coordinator protocol.NodeID = "coord"

func participantNames(n int) []protocol.NodeID {
	out := make([]protocol.NodeID, n)
	for i := range out {
		out[i] = protocol.NodeID(fmt.Sprintf("p%d", i+1))
	}
	return out
}

// worldConfig is a coordinator that may crash crashes times and n
// participants, each voting either way, over an unordered network.
func worldConfig(n, crashes int, eager bool) world.Config {
	ps := participantNames(n)
	nodes := []world.Node{{Name: coordinator, Crashes: crashes, Role: tpcpb.CoordinatorRole(func() tpcpb.CoordinatorHandler {
		return NewCoordinator(ps, eager)
	})}}
	for _, p := range ps {
		nodes = append(nodes, world.Node{Name: p, Role: tpcpb.ParticipantRole(func() tpcpb.ParticipantHandler {
			return &Participant{Coordinator: coordinator}
		})})
	}
	return world.Config{Nodes: nodes, Symmetric: [][]protocol.NodeID{ps}, Invariants: []world.Check{
		{Name: tpcpb.InvariantValidity, Check: valid},
		{Name: tpcpb.InvariantAtomicity, Check: atomic},
	}}
}

// commitSeen is a participant committed, or a commit on its way to one.
func commitSeen(w *world.World) protocol.NodeID {
	for _, n := range w.Nodes()[1:] {
		if tpcpb.ParticipantState(n.State) == tpcpb.ParticipantCommitted {
			return n.Name
		}
	}
	for _, e := range w.InFlight() {
		if _, ok := e.Message.(*tpcpb.Commit); ok {
			return e.To + " (told to)"
		}
	}
	return ""
}

// valid: a commit only once every participant voted yes.
func valid(w *world.World) error {
	committed := commitSeen(w)
	if committed == "" {
		return nil
	}
	for _, n := range w.Nodes()[1:] {
		if st := tpcpb.ParticipantState(n.State); st != tpcpb.ParticipantPrepared && st != tpcpb.ParticipantCommitted {
			return fmt.Errorf("%s committed while %s is %s", committed, n.Name, st)
		}
	}
	return nil
}

// atomic: once a participant aborted, none committed and no commit is on its way.
func atomic(w *world.World) error {
	committed := commitSeen(w)
	for _, n := range w.Nodes()[1:] {
		if tpcpb.ParticipantState(n.State) == tpcpb.ParticipantAborted && committed != "" {
			return fmt.Errorf("%s aborted and %s committed", n.Name, committed)
		}
	}
	return nil
}
