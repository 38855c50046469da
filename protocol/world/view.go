package world

import (
	"time"

	"github.com/rrefkit/rref/protocol"
)

// What checks see of a world. A check reads; a handler it is given is the
// world's own, shared with other states, and must not be changed.

// NodeView is one node as a check sees it.
type NodeView struct {
	Name protocol.NodeID
	Up   bool
	// State is the machine's state: convert it to the generated type
	// (lockpb.ClientState(v.State)).
	State   int
	Handler any // nil while the node is down
}

// Nodes lists the nodes in the order the Config names them.
func (w *World) Nodes() []NodeView {
	out := make([]NodeView, len(w.nodes))
	for i, n := range w.nodes {
		out[i] = NodeView{Name: w.name(i), Up: n.up, State: n.state, Handler: n.handler}
	}
	return out
}

// Node is the node named name, and false when there is none.
func (w *World) Node(name protocol.NodeID) (NodeView, bool) {
	i, ok := w.s.index[name]
	if !ok {
		return NodeView{}, false
	}
	n := w.nodes[i]
	return NodeView{Name: name, Up: n.up, State: n.state, Handler: n.handler}, true
}

// Handler is node name's handler as type H, and false when the node is
// down, unknown, or runs another type.
func Handler[H any](w *World, name protocol.NodeID) (H, bool) {
	n, ok := w.Node(name)
	h, is := n.Handler.(H)
	return h, ok && is
}

// Envelope is a message in flight.
type Envelope struct {
	From, To protocol.NodeID
	Message  any
}

// InFlight lists the messages in flight, decoded (a frame that does not
// decode is left out: the delivery reports it).
func (w *World) InFlight() []Envelope {
	out := make([]Envelope, 0, len(w.net))
	for _, p := range w.net {
		if m, err := w.s.codec.Decode([]byte(p.frame)); err == nil {
			out = append(out, Envelope{From: w.name(p.from), To: w.name(p.to), Message: m})
		}
	}
	return out
}

// Now is the virtual clock.
func (w *World) Now() time.Duration { return w.now }
