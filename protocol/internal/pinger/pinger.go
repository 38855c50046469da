// Package pinger holds the handlers of pingpb that the world's and the
// node's tests run.
package pinger

import (
	"time"

	"github.com/rrefkit/rref/protocol"
	"github.com/rrefkit/rref/protocol/internal/pingpb"
)

// RetryAfter is the pinger's resend period.
const RetryAfter = time.Second

// Pinger pings Peer Rounds times, resending until answered unless NoRetry,
// and keeps the count of answers in its saved record.
type Pinger struct {
	Peer    protocol.NodeID
	Rounds  int
	NoRetry bool
	N       uint64 // the current ping's number
	Answers uint64
}

func (p *Pinger) Enabled(e pingpb.PingerEvent) bool {
	return e != pingpb.PingerOnPing || p.Answers < uint64(p.Rounds)
}

func (p *Pinger) Start(env pingpb.PingerEnv, saved pingpb.Message) error {
	if c, ok := saved.(*pingpb.Count); ok {
		p.Answers, p.N = c.N, c.N
	}
	return nil
}

func (p *Pinger) OnPing(env pingpb.PingerEnv) error {
	p.N++
	return p.OnRetry(env, p.N)
}

func (p *Pinger) OnRetry(env pingpb.PingerEnv, n uint64) error {
	env.Send(p.Peer, &pingpb.Ping{N: n})
	if !p.NoRetry {
		env.SetRetryTimer(RetryAfter, n)
	}
	return nil
}

func (p *Pinger) OnPong(env pingpb.PingerEnv, from protocol.NodeID, m *pingpb.Pong) error {
	if m.N != p.N {
		return protocol.ErrSkip
	}
	env.CancelRetryTimer(m.N)
	p.Answers++
	env.Save(&pingpb.Count{N: p.Answers})
	return nil
}

func (p *Pinger) OnStop(env pingpb.PingerEnv) error { return nil }

// Ponger answers pings; it quits (after which a ping is undeclared) only
// if MayQuit.
type Ponger struct {
	MayQuit   bool
	Last      uint64 // the highest ping answered
	Regressed bool   // a ping came numbered below one answered: the pinger forgot
}

func (p *Ponger) Enabled(e pingpb.PongerEvent) bool { return p.MayQuit }

func (p *Ponger) OnPing(env pingpb.PongerEnv, from protocol.NodeID, m *pingpb.Ping) error {
	p.Regressed = p.Regressed || m.N < p.Last
	p.Last = max(p.Last, m.N)
	env.Send(from, &pingpb.Pong{N: m.N})
	return nil
}

func (p *Ponger) OnQuit(env pingpb.PongerEnv) error { return nil }
