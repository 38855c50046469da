package world

import "github.com/rrefkit/rref/protocol"

// AppendSwapped is w's encoding with nodes x and y, of one symmetric
// group, swapped: what AppendState gives of the world renamed so.
func AppendSwapped(w *World, b []byte, x, y protocol.NodeID) []byte {
	return w.appendRenamed(b, w.swap(w.s.index[x], w.s.index[y]))
}
