// Package protocol is what a protocol's handlers are written against, and
// what runs them: write each machine's handlers once, against the
// interfaces rrefgen generates from the spec (a handler interface with one
// method per event, and the environment it acts through), and the same
// code is explored by the model checker (package protocol/world, over
// package explore) and runs for real across processes (package
// protocol/node, over the fifo transport).
//
// For a machine M in a spec, rrefgen writes into the generated package:
//
//   - MHandler: one method per event, OnE(env MEnv, ...) error, typed by
//     the event's payload (a message event also gets its sender);
//   - MEnv: the environment: Self, Now, Logf (this package's Env), Send and
//     Save of the protocol's messages, RaiseE for each internal event,
//     SetETimer and CancelETimer for each timer event;
//   - MGuard and MStarter: optional, a guard on inputs and a start hook;
//   - MRole(func() MHandler): the handlers bound to the machine, a Role.
//
// A handler's return value decides the transition: nil takes the one the
// spec declares for the event in the current state, ErrSkip keeps the
// state (a guard that does not hold), and any other error is a failure
// (a violation in the explorer; the node stops). An event the spec neither
// handles nor ignores in the current state never reaches the handler: it
// is a violation, as in the P language. An ignored event does not either.
//
// The types below the Role (Machine, Host, Codec) are the bridge between
// generated code and the runtimes; user code does not call them.
package protocol

import (
	"errors"
	"fmt"
	"time"

	"github.com/rrefkit/rref/genrt"
)

// NodeID names a node: one machine instance of a protocol, in a world or a
// group of processes.
type NodeID string

// ErrSkip is returned by a handler whose guard does not hold: the event is
// consumed and the machine stays in its state, as if the spec ignored it
// there. What the handler did before returning it stands, so a guard is
// checked before acting. It is not a failure.
var ErrSkip = errors.New("protocol: the guard does not hold: event skipped")

// ErrUndeclared is matched (errors.Is) by an event the spec neither handles
// nor ignores in the machine's state, and by a message no event of the
// receiving machine carries.
var ErrUndeclared = errors.New("protocol: undeclared event")

// ErrPayload is matched by an event whose payload is not of the type the
// spec declares (a runtime's fault, or a message sent to the wrong machine).
var ErrPayload = errors.New("protocol: payload of the wrong type")

// ErrNotMessage is matched by a Send or Save of a value that is not one of
// the protocol's messages.
var ErrNotMessage = errors.New("protocol: not a message of the protocol")

// Env is what every environment gives a handler, whatever its machine;
// each machine's generated environment adds the typed sends, raises and
// timers.
type Env interface {
	// Self is the node this handler runs as.
	Self() NodeID
	// Now is the time since the node started: virtual in the explorer, the
	// monotonic clock in a node. A handler that keeps times in its state
	// makes every state new to the explorer: keep timers instead.
	Now() time.Duration
	// Logf logs a line about the node (the explorer keeps none).
	Logf(format string, args ...any)
}

// EventSource is where an event comes from (the spec's event modifiers).
type EventSource uint8

const (
	Internal    EventSource = iota // raised by the machine's own handlers
	FromMessage                    // a message delivered by the network
	Input                          // fired by the application, or by the explorer's world
	Timer                          // fired by a timer a handler set
)

func (s EventSource) String() string {
	switch s {
	case FromMessage:
		return "message"
	case Input:
		return "input"
	case Timer:
		return "timer"
	}
	return "internal"
}

// Host is the runtime under a generated environment, untyped: the world
// and the node implement it, the generated environment types it.
type Host interface {
	Env
	// Send queues message m to node to.
	Send(to NodeID, m any)
	// Save replaces the node's durable record with m: it survives a crash
	// and is handed to the start hook when the node starts again.
	Save(m any)
	// Raise queues internal event e (with its payload, or nil) to be
	// stepped right after the running handler returns, before any other
	// event.
	Raise(e int, payload any)
	// SetTimer arms timer event e keyed by payload to fire after d,
	// replacing one armed with the same event and payload.
	SetTimer(e int, d time.Duration, payload any)
	// CancelTimer disarms timer event e keyed by payload, if armed.
	CancelTimer(e int, payload any)
}

// Codec is a protocol's wire: framed messages, by the generated codecs.
type Codec struct {
	Name   string
	Append func(b []byte, m any) ([]byte, error)
	Decode func(b []byte) (any, error)
}

// Machine is a generated machine as a runtime drives it: its table and how
// to call its handlers. Events and states are their generated indexes.
type Machine struct {
	Info    *genrt.MachineInfo
	Codec   *Codec
	Start   int
	Sources []EventSource // by event
	// Step is the generated table's step.
	Step func(state, event int) (next int, out genrt.Outcome, err error)
	// EventOf is the event that delivers message m in state, or false when
	// no event of the machine carries it.
	EventOf func(state int, m any) (event int, ok bool)
	// Call runs handler h's method for event, with its sender (message
	// events) and payload.
	Call func(h any, host Host, event int, from NodeID, payload any) error
	// Enabled is handler h's guard on input event (true without a guard).
	Enabled func(h any, event int) bool
	// Begin runs handler h's start hook, if it has one, with its saved
	// record (nil when none).
	Begin func(h any, host Host, saved any) error
}

// Hot reports whether state is hot: the node must not stay there.
func (m *Machine) Hot(state int) bool { return m.Info.States[state].Hot }

// Final reports whether state is final.
func (m *Machine) Final(state int) bool { return m.Info.States[state].Final }

// StateName and EventName name a state and an event as the spec does.
func (m *Machine) StateName(state int) string { return m.Info.States[state].Name }
func (m *Machine) EventName(event int) string { return m.Info.Events[event].Name }

// Role is a machine with its handlers: what one node of a protocol runs.
// The generated MRole makes one.
type Role struct {
	Machine *Machine
	// New makes a node's handler as it starts: at first, and again after a
	// crash, when only what it saved survives.
	New func() any
}

// Undeclared is the error of an event the table refuses, or a message
// the machine has no event for.
func Undeclared(m *Machine, state int, what string) error {
	return fmt.Errorf("%w: machine %s in state %s: %s", ErrUndeclared, m.Info.Name, m.StateName(state), what)
}
