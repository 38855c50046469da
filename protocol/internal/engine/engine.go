// Package engine steps one machine instance: the spec's table first, then
// the handler, then the events its handlers raise, to completion. The
// world and the node run events through it alike.
package engine

import (
	"errors"
	"fmt"

	"github.com/rrefkit/rref/genrt"
	"github.com/rrefkit/rref/protocol"
)

// MaxRaises bounds the events one event may raise: handlers that raise
// one another forever are a failure, not a hang.
const MaxRaises = 1000

// ErrRaises is matched by the error of an event whose handlers raised
// more than MaxRaises events.
var ErrRaises = errors.New("protocol: handlers raised events without end")

// Raised is an internal event a handler raised, waiting its turn.
type Raised struct {
	Event   int
	Payload any
}

// Instance is one machine and its handler.
type Instance struct {
	Machine *protocol.Machine
	State   int
	Handler any
	// Raised are the events raised and not yet stepped: the host's Raise
	// appends here.
	Raised []Raised
}

// HandlerError is a handler's own failure, apart from the table's refusal.
type HandlerError struct {
	Machine, State, Event string
	Err                   error
}

func (e *HandlerError) Error() string {
	return fmt.Sprintf("machine %s in state %s on %s: %v", e.Machine, e.State, e.Event, e.Err)
}

func (e *HandlerError) Unwrap() error { return e.Err }

// Run steps event and then every event raised meanwhile. An error wraps
// protocol.ErrUndeclared (the table refused an event), ErrRaises, or is a
// *HandlerError.
func (in *Instance) Run(host protocol.Host, event int, from protocol.NodeID, payload any) error {
	if err := in.step(host, event, from, payload); err != nil {
		return err
	}
	return in.Drain(host)
}

// Drain steps the raised events until none is left (after a start hook).
func (in *Instance) Drain(host protocol.Host) error {
	for n := 0; len(in.Raised) > 0; n++ {
		if n == MaxRaises {
			return fmt.Errorf("%w: %d in one step of machine %s", ErrRaises, MaxRaises, in.Machine.Info.Name)
		}
		r := in.Raised[0]
		in.Raised = in.Raised[1:]
		if err := in.step(host, r.Event, "", r.Payload); err != nil {
			return err
		}
	}
	in.Raised = nil
	return nil
}

func (in *Instance) step(host protocol.Host, event int, from protocol.NodeID, payload any) error {
	m := in.Machine
	next, out, err := m.Step(in.State, event)
	if err != nil {
		return protocol.Undeclared(m, in.State, "event "+m.EventName(event))
	}
	if out != genrt.Moved { // ignored by the spec: no handler runs
		return nil
	}
	switch err := m.Call(in.Handler, host, event, from, payload); {
	case errors.Is(err, protocol.ErrSkip):
	case err != nil:
		return &HandlerError{Machine: m.Info.Name, State: m.StateName(in.State), Event: m.EventName(event), Err: err}
	default:
		in.State = next
	}
	return nil
}
