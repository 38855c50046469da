package main

//go:generate go run ../../cmd/rrefgen gen -out dgcpb -pkg github.com/rrefkit/rref/examples/dgc/dgcpb dgc.rspec

import (
	"time"

	"github.com/rrefkit/rref/examples/dgc/dgcpb"
	"github.com/rrefkit/rref/protocol"
)

// Owner keeps the object while any client holds a lease on it.
type Owner struct {
	Lease      time.Duration // how long a dirty call keeps the object for its client
	Clients    int           // how many clients will say bye
	Unsafe     bool          // the seeded bug: sequence numbers are not checked
	Unexported bool
	Seq        map[protocol.NodeID]uint64 // the latest call heard from each client
	Holders    map[protocol.NodeID]bool
	Byes       int
}

func NewOwner(lease time.Duration, clients int, unsafe bool) *Owner {
	return &Owner{Lease: lease, Clients: clients, Unsafe: unsafe, Seq: map[protocol.NodeID]uint64{}, Holders: map[protocol.NodeID]bool{}}
}

// stale reports a call older than one heard since (a renewal repeats its
// take's number); it records a fresh one.
func (o *Owner) stale(from protocol.NodeID, seq uint64, renewal bool) bool {
	if last := o.Seq[from]; !o.Unsafe && (seq < last || seq == last && !renewal) {
		return true
	}
	o.Seq[from] = seq
	return false
}

func (o *Owner) OnDirty(env dgcpb.OwnerEnv, from protocol.NodeID, m *dgcpb.Dirty) error {
	switch {
	case o.stale(from, m.Seq, true):
		return protocol.ErrSkip
	case o.Unexported && !o.Holders[from]:
		env.Send(from, &dgcpb.Gone{Seq: m.Seq})
	default:
		o.Holders[from] = true
		env.SetExpireTimer(o.Lease, from)
		env.Send(from, &dgcpb.Leased{Seq: m.Seq})
	}
	return nil
}

func (o *Owner) OnClean(env dgcpb.OwnerEnv, from protocol.NodeID, m *dgcpb.Clean) error {
	if o.stale(from, m.Seq, false) {
		return protocol.ErrSkip
	}
	env.CancelExpireTimer(from)
	return o.OnExpire(env, from)
}

func (o *Owner) OnExpire(env dgcpb.OwnerEnv, client protocol.NodeID) error {
	delete(o.Holders, client)
	return o.collect(env)
}

func (o *Owner) OnUnexport(env dgcpb.OwnerEnv) error {
	o.Unexported = true
	return o.collect(env)
}

func (o *Owner) collect(env dgcpb.OwnerEnv) error {
	if o.Unexported && len(o.Holders) == 0 {
		env.RaiseCollect()
	}
	return nil
}

func (o *Owner) OnBye(env dgcpb.OwnerEnv, from protocol.NodeID, m *dgcpb.Bye) error {
	o.Byes++
	return o.OnCollect(env)
}

// OnCollect also runs on every bye: the owner closes once collected and told by every client.
func (o *Owner) OnCollect(env dgcpb.OwnerEnv) error {
	if o.Byes == o.Clients && o.Unexported && len(o.Holders) == 0 {
		env.RaiseClose()
	}
	return nil
}

func (o *Owner) OnClose(env dgcpb.OwnerEnv) error { return nil }

// Client takes the object Rounds times, renewing its lease while it holds it.
type Client struct {
	Owner  protocol.NodeID
	Renew  time.Duration
	Rounds int    // takes left
	Seq    uint64 // its latest call's number
}

func (c *Client) Enabled(e dgcpb.ClientEvent) bool { return e != dgcpb.ClientOnTake || c.Rounds > 0 }

func (c *Client) OnTake(env dgcpb.ClientEnv) error {
	c.Rounds, c.Seq = c.Rounds-1, c.Seq+1
	return c.OnRenew(env)
}

// OnLeased arms the next renewal, Renew after each grant of the current take.
func (c *Client) OnLeased(env dgcpb.ClientEnv, from protocol.NodeID, m *dgcpb.Leased) error {
	if m.Seq != c.Seq {
		return protocol.ErrSkip
	}
	env.SetRenewTimer(c.Renew)
	return nil
}

func (c *Client) OnGone(env dgcpb.ClientEnv, from protocol.NodeID, m *dgcpb.Gone) error {
	if m.Seq != c.Seq {
		return protocol.ErrSkip
	}
	return nil
}

// OnRenew is also the take's dirty call: a renewal repeats its number.
func (c *Client) OnRenew(env dgcpb.ClientEnv) error {
	env.Send(c.Owner, &dgcpb.Dirty{Seq: c.Seq})
	return nil
}

func (c *Client) OnDrop(env dgcpb.ClientEnv) error {
	c.Seq++
	env.CancelRenewTimer()
	env.Send(c.Owner, &dgcpb.Clean{Seq: c.Seq})
	return nil
}

func (c *Client) OnFinish(env dgcpb.ClientEnv) error {
	env.Send(c.Owner, &dgcpb.Bye{})
	return nil
}
