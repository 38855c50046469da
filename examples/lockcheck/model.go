package main

import (
	"fmt"
	"strings"

	"github.com/rrefkit/rref/examples/lockcheck/lockpb"
	"github.com/rrefkit/rref/protocol"
	"github.com/rrefkit/rref/protocol/world"
)

// Config is one exploration of the lock protocol.
type Config struct {
	Clients int // clients, named c1..cN
	Rounds  int // how many times each client takes and gives back the lock
	Resends int // how many messages the network may deliver twice (a resend after a reconnect)
	// The seeded bugs, to show what the engine finds.
	Forgetful bool // the server does not recognise a resent Acquire
	Trusting  bool // the server frees the lock on any Release, whatever its token
}

const server protocol.NodeID = "server"

// worldConfig is the server and the clients over an unordered network
// that may deliver Resends messages twice. The clients run one program:
// they are declared interchangeable, and the search keeps one state of
// each class of states alike but for their names.
func worldConfig(cfg Config) world.Config {
	nodes := []world.Node{{Name: server, Role: lockpb.ServerRole(func() lockpb.ServerHandler {
		return &Server{Clients: cfg.Clients, Rounds: cfg.Rounds, Forgetful: cfg.Forgetful, Trusting: cfg.Trusting,
			Seen: map[protocol.NodeID]uint64{}, Grants: map[protocol.NodeID]int{}}
	})}}
	var clients []protocol.NodeID
	for i := range cfg.Clients {
		name := protocol.NodeID(fmt.Sprintf("c%d", i+1))
		clients = append(clients, name)
		nodes = append(nodes, world.Node{Name: name, Role: lockpb.ClientRole(func() lockpb.ClientHandler {
			return &Client{Server: server, Rounds: cfg.Rounds}
		})})
	}
	return world.Config{
		Network:   world.Network{Duplicates: cfg.Resends},
		Nodes:     nodes,
		Symmetric: [][]protocol.NodeID{clients},
		Invariants: []world.Check{
			{Name: lockpb.InvariantMutex, Check: mutex},
			{Name: lockpb.InvariantFencing, Check: fencing},
		},
		AtEnd: []world.Check{{Name: lockpb.InvariantProgress, Check: progress}},
	}
}

// holders are the clients holding the lock.
func holders(w *world.World) []world.NodeView {
	var out []world.NodeView
	for _, n := range w.Nodes()[1:] {
		if lockpb.ClientState(n.State) == lockpb.ClientHolding {
			out = append(out, n)
		}
	}
	return out
}

func mutex(w *world.World) error {
	if h := holders(w); len(h) > 1 {
		var names []string
		for _, n := range h {
			names = append(names, string(n.Name))
		}
		return fmt.Errorf("%s hold the lock at once", strings.Join(names, " and "))
	}
	return nil
}

// fencing: the holder's token is larger than any other client's latest.
func fencing(w *world.World) error {
	for _, h := range holders(w) {
		for _, n := range w.Nodes()[1:] {
			if c := n.Handler.(*Client); n.Name != h.Name && c.Token >= h.Handler.(*Client).Token {
				return fmt.Errorf("%s holds token %d, and %s was granted %d", h.Name, h.Handler.(*Client).Token, n.Name, c.Token)
			}
		}
	}
	return nil
}

// progress: a run ends with every client done and the server closed (the
// world's own end check, that no client rests waiting, a hot state, comes
// first).
func progress(w *world.World) error {
	for _, n := range w.Nodes() {
		if st := lockpb.ServerState(n.State); n.Name == server && st != lockpb.ServerClosed {
			return fmt.Errorf("the run ended with the server %s, held by %q", st, n.Handler.(*Server).Holder)
		}
		if st := lockpb.ClientState(n.State); n.Name != server && st != lockpb.ClientDone {
			return fmt.Errorf("the run ended with %s %s", n.Name, st)
		}
	}
	return nil
}
