package main

//go:generate go run ../../cmd/rrefgen gen -out ownpb -pkg github.com/rrefkit/rref/examples/ownership/ownpb own.rspec

import (
	"github.com/rrefkit/rref/examples/ownership/ownpb"
	"github.com/rrefkit/rref/protocol"
)

// Owner lends its value to First as it starts, and frees it once neither
// it nor any borrower holds a reference.
type Owner struct {
	First   protocol.NodeID
	Dropped bool
	Holders map[protocol.NodeID]bool
}

func NewOwner(first protocol.NodeID) *Owner {
	return &Owner{First: first, Holders: map[protocol.NodeID]bool{}}
}

func (o *Owner) Enabled(e ownpb.OwnerEvent) bool { return !o.Dropped }

func (o *Owner) Start(env ownpb.OwnerEnv, saved ownpb.Message) error {
	o.Holders[o.First] = true
	env.Send(o.First, &ownpb.Lend{})
	return nil
}

func (o *Owner) OnForked(env ownpb.OwnerEnv, from protocol.NodeID, m *ownpb.Fork) error {
	o.Holders[m.Child] = true
	env.Send(from, &ownpb.ForkAck{Child: m.Child})
	return nil
}

func (o *Owner) OnReturned(env ownpb.OwnerEnv, from protocol.NodeID, m *ownpb.Return) error {
	delete(o.Holders, from)
	return o.free(env)
}

func (o *Owner) OnDrop(env ownpb.OwnerEnv) error {
	o.Dropped = true
	return o.free(env)
}

// free frees the value once nothing holds a reference.
func (o *Owner) free(env ownpb.OwnerEnv) error {
	if o.Dropped && len(o.Holders) == 0 {
		env.RaiseFree()
	}
	return nil
}

func (o *Owner) OnFree(env ownpb.OwnerEnv) error { return nil }

// Borrower holds a reference while it is lent one, and passes it on to Next
// (once) before it returns its own.
type Borrower struct {
	Owner, Next protocol.NodeID
	Silent      bool // the seeded bug: pass the reference without telling the owner
	Passed      bool
}

func (b *Borrower) Enabled(e ownpb.BorrowerEvent) bool {
	return e != ownpb.BorrowerOnPass || b.Next != "" && !b.Passed
}

func (b *Borrower) OnLent(env ownpb.BorrowerEnv, from protocol.NodeID, m *ownpb.Lend) error {
	return nil
}

func (b *Borrower) OnPass(env ownpb.BorrowerEnv) error {
	if b.Silent {
		b.Passed = true
		env.Send(b.Next, &ownpb.Lend{})
		return protocol.ErrSkip // keeps holding: it waits for no acknowledgement
	}
	env.Send(b.Owner, &ownpb.Fork{Child: b.Next})
	return nil
}

func (b *Borrower) OnAcked(env ownpb.BorrowerEnv, from protocol.NodeID, m *ownpb.ForkAck) error {
	b.Passed = true
	env.Send(m.Child, &ownpb.Lend{})
	return nil
}

func (b *Borrower) OnReturn(env ownpb.BorrowerEnv) error {
	env.Send(b.Owner, &ownpb.Return{})
	return nil
}
