package main

import (
	"github.com/rrefkit/rref/examples/lockcheck/lockpb"
	"github.com/rrefkit/rref/explore"
	"github.com/rrefkit/rref/genrt"
)

// The clients run one program with the same number of rounds: renaming
// them maps every run onto a run. System is an explore.Symmetric model, so
// that the search keeps one state of each class of states that differ only
// in which client is which.

// clientGroup is the clients' group, the model's only one.
const clientGroup = 0

// Symmetry implements explore.Symmetric: the clients are interchangeable.
func (s *System) Symmetry() []int { return []int{len(s.clients)} }

// AppendPermuted implements explore.Symmetric: the state encoded with its
// clients renamed by p, in their places, the server's holder, queue and
// request numbers, and the frames in flight, to them and inside them.
func (s *System) AppendPermuted(b []byte, p explore.Permutation) []byte {
	return s.appendState(b, &p)
}

// Machines implements explore.Coverer: the coverage report lists the
// spec's machines, each transition taken or not.
func (s *System) Machines() []*genrt.MachineInfo { return lockpb.Machines }

// original is the client (by index) that p puts at index j.
func original(p *explore.Permutation, j int) int {
	if p == nil {
		return j
	}
	return p.Original(clientGroup, j)
}

// rename is client id renamed by p; 0, no client, stays 0.
func rename(p *explore.Permutation, id lockpb.ClientID) lockpb.ClientID {
	if p == nil || id == 0 {
		return id
	}
	return lockpb.ClientID(p.Rename(clientGroup, int(id)-1) + 1)
}

// renameFrame is frame with the client it names renamed by p: a frame
// that names none (a Grant: its addressee is the packet's), or that does
// not decode (which delivering it reports), stays as it is.
func renameFrame(p *explore.Permutation, frame string) string {
	if p == nil {
		return frame
	}
	m, err := lockpb.Decode([]byte(frame), nil)
	if err != nil {
		return frame
	}
	switch m := m.(type) {
	case *lockpb.Acquire:
		m.Client = rename(p, m.Client)
	case *lockpb.Release:
		m.Client = rename(p, m.Client)
	default:
		return frame
	}
	return string(lockpb.AppendFrame(nil, m))
}
