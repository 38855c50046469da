package main

import (
	"github.com/rrefkit/rref/examples/lockcheck/lockpb"
	"github.com/rrefkit/rref/protocol"
)

// Client takes the lock Rounds times, numbering its requests.
type Client struct {
	Server  protocol.NodeID
	Rounds  int    // acquisitions left
	Request uint64 // the current request's number
	Token   uint64 // the token of its latest grant
}

// Enabled: a client asks while it has rounds left, and finishes after.
func (c *Client) Enabled(e lockpb.ClientEvent) bool {
	switch e {
	case lockpb.ClientOnAsk:
		return c.Rounds > 0
	case lockpb.ClientOnFinish:
		return c.Rounds == 0
	}
	return true
}

func (c *Client) OnAsk(env lockpb.ClientEnv) error {
	c.Rounds--
	c.Request++
	env.Send(c.Server, &lockpb.Acquire{Request: c.Request})
	return nil
}

func (c *Client) OnGranted(env lockpb.ClientEnv, from protocol.NodeID, m *lockpb.Grant) error {
	if m.Request != c.Request {
		return protocol.ErrSkip // the answer to a resent request, answered already
	}
	c.Token = m.Token
	return nil
}

func (c *Client) OnGive(env lockpb.ClientEnv) error {
	env.Send(c.Server, &lockpb.Release{Token: c.Token})
	return nil
}

func (c *Client) OnFinish(env lockpb.ClientEnv) error { return nil }

// Server grants the lock to one request at a time, queueing the others,
// each grant with a token larger than the last.
type Server struct {
	Clients, Rounds int // it closes once it granted every client's rounds
	// The seeded bugs, to show what the engine finds.
	Forgetful bool // it does not recognise a resent Acquire
	Trusting  bool // it frees the lock on any Release, whatever its token

	Holder protocol.NodeID
	Token  uint64                     // the last token granted
	Queue  []Waiter                   // requests waiting for the lock, oldest first
	Seen   map[protocol.NodeID]uint64 // the highest request heard from each client
	Grants map[protocol.NodeID]int
}

// Waiter is a request in the queue.
type Waiter struct {
	Client  protocol.NodeID
	Request uint64
}

// Enabled: the server closes once the lock is free and every round granted.
func (s *Server) Enabled(lockpb.ServerEvent) bool {
	if s.Holder != "" || len(s.Grants) < s.Clients {
		return false
	}
	for _, n := range s.Grants {
		if n < s.Rounds {
			return false
		}
	}
	return true
}

func (s *Server) OnLock(env lockpb.ServerEnv, from protocol.NodeID, m *lockpb.Acquire) error {
	if !s.Forgetful {
		if m.Request <= s.Seen[from] {
			return protocol.ErrSkip // a resend of a request already queued or granted
		}
		s.Seen[from] = m.Request
	}
	if s.Holder != "" {
		s.Queue = append(s.Queue, Waiter{from, m.Request})
		return nil
	}
	s.grant(env, Waiter{from, m.Request})
	return nil
}

func (s *Server) grant(env lockpb.ServerEnv, w Waiter) {
	s.Holder = w.Client
	s.Token++
	s.Grants[w.Client]++
	env.Send(w.Client, &lockpb.Grant{Request: w.Request, Token: s.Token})
}

func (s *Server) OnUnlock(env lockpb.ServerEnv, from protocol.NodeID, m *lockpb.Release) error {
	if !s.Trusting && (from != s.Holder || m.Token != s.Token) {
		return protocol.ErrSkip // a resent release of an earlier holding
	}
	s.Holder = ""
	if len(s.Queue) > 0 {
		env.RaiseHandOver()
	}
	return nil
}

func (s *Server) OnHandOver(env lockpb.ServerEnv) error {
	next := s.Queue[0]
	s.Queue = s.Queue[1:]
	s.grant(env, next)
	return nil
}

func (s *Server) OnClose(env lockpb.ServerEnv) error { return nil }
