package main

//go:generate go run ../../cmd/rrefgen gen -out tpcpb -pkg github.com/rrefkit/rref/examples/twophase/tpcpb tpc.rspec

import (
	"maps"
	"slices"

	"github.com/rrefkit/rref/examples/twophase/tpcpb"
	"github.com/rrefkit/rref/protocol"
)

// Coordinator runs one transaction over Participants.
type Coordinator struct {
	Participants map[protocol.NodeID]bool // a set, which renaming them leaves as it is
	Eager        bool                     // the seeded bug: commit on the first yes
	Yes          map[protocol.NodeID]bool // volatile: a crash loses the votes
	Acked        map[protocol.NodeID]bool
	Commit       bool // the logged decision, after a restart
}

func NewCoordinator(participants []protocol.NodeID, eager bool) *Coordinator {
	c := &Coordinator{Participants: map[protocol.NodeID]bool{}, Eager: eager, Yes: map[protocol.NodeID]bool{}, Acked: map[protocol.NodeID]bool{}}
	for _, p := range participants {
		c.Participants[p] = true
	}
	return c
}

// Start recovers from the log: a decision is sent again; a transaction
// begun and not decided is aborted.
func (c *Coordinator) Start(env tpcpb.CoordinatorEnv, saved tpcpb.Message) error {
	switch log, _ := saved.(*tpcpb.Log); {
	case log == nil:
	case log.Decided:
		c.Commit = log.Commit
		env.RaiseRecover()
	default:
		env.RaiseAbort()
	}
	return nil
}

func (c *Coordinator) OnBegin(env tpcpb.CoordinatorEnv) error {
	env.Save(&tpcpb.Log{})
	c.broadcast(env, &tpcpb.Prepare{})
	return nil
}

func (c *Coordinator) OnVoted(env tpcpb.CoordinatorEnv, from protocol.NodeID, m *tpcpb.Vote) error {
	if !m.Yes {
		env.RaiseAbort()
		return nil
	}
	if c.Yes[from] = true; c.Eager || len(c.Yes) == len(c.Participants) {
		env.RaiseCommit()
	}
	return nil
}

func (c *Coordinator) OnCommit(env tpcpb.CoordinatorEnv) error { return c.decide(env, true) }
func (c *Coordinator) OnAbort(env tpcpb.CoordinatorEnv) error  { return c.decide(env, false) }

// decide logs the decision before anyone hears it.
func (c *Coordinator) decide(env tpcpb.CoordinatorEnv, commit bool) error {
	env.Save(&tpcpb.Log{Decided: true, Commit: commit})
	return c.send(env, commit)
}

func (c *Coordinator) OnRecover(env tpcpb.CoordinatorEnv) error { return c.send(env, c.Commit) }

func (c *Coordinator) send(env tpcpb.CoordinatorEnv, commit bool) error {
	if commit {
		c.broadcast(env, &tpcpb.Commit{})
	} else {
		c.broadcast(env, &tpcpb.Abort{})
	}
	return c.OnAcked(env, "", nil)
}

// OnAcked also runs once a decision is sent: finish when every yes-voter acknowledged.
func (c *Coordinator) OnAcked(env tpcpb.CoordinatorEnv, from protocol.NodeID, m *tpcpb.Ack) error {
	if from != "" {
		c.Acked[from] = true
	}
	for p := range c.Yes {
		if !c.Acked[p] {
			return nil
		}
	}
	env.RaiseFinish()
	return nil
}

func (c *Coordinator) OnFinish(env tpcpb.CoordinatorEnv) error { return nil }

func (c *Coordinator) broadcast(env tpcpb.CoordinatorEnv, m tpcpb.Message) {
	for _, p := range slices.Sorted(maps.Keys(c.Participants)) { // in one order, for replays
		env.Send(p, m)
	}
}

// Participant votes as its application decides (an input) and obeys the decision.
type Participant struct {
	Coordinator protocol.NodeID
}

func (p *Participant) OnPrepared(env tpcpb.ParticipantEnv, from protocol.NodeID, m *tpcpb.Prepare) error {
	return nil
}

func (p *Participant) OnVoteYes(env tpcpb.ParticipantEnv) error {
	env.Send(p.Coordinator, &tpcpb.Vote{Yes: true})
	return nil
}

func (p *Participant) OnVoteNo(env tpcpb.ParticipantEnv) error {
	env.Send(p.Coordinator, &tpcpb.Vote{Yes: false})
	return nil
}

func (p *Participant) OnCommitted(env tpcpb.ParticipantEnv, from protocol.NodeID, m *tpcpb.Commit) error {
	env.Send(p.Coordinator, &tpcpb.Ack{})
	return nil
}

func (p *Participant) OnAborted(env tpcpb.ParticipantEnv, from protocol.NodeID, m *tpcpb.Abort) error {
	env.Send(p.Coordinator, &tpcpb.Ack{})
	return nil
}
