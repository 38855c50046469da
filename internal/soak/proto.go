package soak

import (
	"time"

	"github.com/rrefkit/rref/runtime/worker"
)

// The parent drives each member over the member's standard input, one JSON
// object a line, and the member reports on its standard output the same
// way. Standard input doubles as the member's lifeline: when it closes,
// the parent is done or dead, and the member exits at once.

// memberEnv selects member mode in a re-executed child (see ServeMember).
const memberEnv = "RREF_SOAK_MEMBER"

// Commands, parent to member.
const (
	cmdConfig = "config" // the first line: who the member is, its peers
	cmdGo     = "go"     // start traffic
	cmdDead   = "dead"   // a member was killed: stop choosing it
	cmdStop   = "stop"   // stop starting operations, finish, report quiet
	cmdFinish = "finish" // drop what is still held, Shutdown, report done
)

// Events, member to parent.
const (
	evUp        = "up"        // worker.Start returned
	evStartFail = "startfail" // worker.Start failed (Err)
	evStats     = "stats"     // a snapshot of the member's counts
	evFail      = "fail"      // an operation failed, was wrong or hung (Fail)
	evQuiet     = "quiet"     // traffic stopped and drained (Stats: final)
	evDone      = "done"      // Shutdown returned (Done)
	evPeerDead  = "peerdead"  // the member's worker took a peer for dead (Member)
	evFenced    = "fenced"    // the group fenced this member (Err): its worker closed
)

type command struct {
	Cmd    string        `json:"cmd"`
	Config *memberConfig `json:"config,omitempty"`
	Member int           `json:"member,omitempty"` // cmdDead
}

// memberConfig is everything a member needs for one round.
type memberConfig struct {
	Round  int           `json:"round"`
	Self   int           `json:"self"`
	Names  []string      `json:"names"`
	Peers  []worker.Peer `json:"peers"` // this member's view: its tcp links to earlier members go through relays
	Secret []byte        `json:"secret"`
	Seed   uint64        `json:"seed"`

	Clients         int           `json:"clients"`
	OpDeadline      time.Duration `json:"op_deadline"`
	InnerDeadline   time.Duration `json:"inner_deadline"`
	ShutdownTimeout time.Duration `json:"shutdown_timeout"`
	StartTimeout    time.Duration `json:"start_timeout"`
	Inject          string        `json:"inject,omitempty"`
	HangFor         time.Duration `json:"hang_for,omitempty"`
	DeadAfter       time.Duration `json:"dead_after"`
}

type event struct {
	Ev    string       `json:"ev"`
	Err   string       `json:"err,omitempty"`
	Stats *memberStats `json:"stats,omitempty"`
	Fail  *failure     `json:"fail,omitempty"`
	Done  *doneInfo    `json:"done,omitempty"`
	// Member is the peer of evPeerDead.
	Member int `json:"member,omitempty"`
}

// memberStats are a member's cumulative counts.
type memberStats struct {
	OK      map[string]uint64 `json:"ok"`      // operations by kind that returned what they must
	Started map[string]uint64 `json:"started"` // operations by kind begun
	Calls   map[string]uint64 `json:"calls"`   // runtime calls by kind (see prim*)
	// OKAfterDeath counts operations completed after this member heard of
	// a kill: the rest of the group keeps working.
	OKAfterDeath uint64 `json:"ok_after_death"`
	MessagesSent uint64 `json:"messages_sent"`
	// Goroutines and HeapBytes sample the member's process: at Start, and
	// once its traffic has stopped and drained, to tell a leak from load.
	Goroutines int    `json:"goroutines"`
	HeapBytes  uint64 `json:"heap_bytes"`
}

// Failure classes, as the member sees an error (the parent then decides
// whether a kill explains a "peer" failure).
const (
	classWrong = "wrong" // a value differs from the one it must have
	classHung  = "hung"  // the operation, or a call inside it, passed its deadline
	classPeer  = "peer"  // a peer, owner or reference failed: only a kill may explain it
	classOther = "other" // any other error: always unexpected
)

// failure is one operation that did not return what it must.
type failure struct {
	Round    int    `json:"round"`
	Member   int    `json:"member"`
	Client   int    `json:"client"`
	Op       uint64 `json:"op"` // the client's operation counter
	Kind     string `json:"kind"`
	Involved uint64 `json:"involved"` // bit i: member i took part (caller, callee, owner, holder, forwarder)
	Start    int64  `json:"start"`    // Unix nanoseconds (one host: one clock for all)
	End      int64  `json:"end"`
	Class    string `json:"class"`
	Err      string `json:"err"`
}

// doneInfo is what Shutdown left.
type doneInfo struct {
	// Records counts the references a LeakError listed (values owned,
	// references, lent copies); Unsettled is a LeakError with none listed here (the
	// group did not settle around this member).
	Records   int    `json:"records"`
	Unsettled bool   `json:"unsettled"`
	Leak      string `json:"leak,omitempty"` // the LeakError's text
	Err       string `json:"err,omitempty"`  // any other Shutdown error
	// Holds this member still kept for others at the end of traffic:
	// placed by a member since killed (expected, released here), or by a
	// live one (its hold call failed or hung after the value arrived).
	HeldForDead, HeldForLive int
	Illegal, BadInput        int
	MessagesSent             uint64
	// Fenced: the group fenced this member; it did not run Shutdown (its
	// worker had closed, its references reclaimed by the others).
	Fenced bool `json:"fenced,omitempty"`
}
