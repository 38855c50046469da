package genrt

import (
	"errors"
	"fmt"
)

// ErrIllegalTransition is matched (errors.Is) by every *TransitionError.
var ErrIllegalTransition = errors.New("genrt: illegal transition")

// TransitionError reports an event that the spec neither handles nor ignores in
// the current state (the P language's rule: no silent no-op).
type TransitionError struct {
	Machine string
	State   string
	Event   string
}

func (e *TransitionError) Error() string {
	return fmt.Sprintf("genrt: machine %s: event %s is illegal in state %s", e.Machine, e.Event, e.State)
}

func (e *TransitionError) Is(target error) bool { return target == ErrIllegalTransition }

// Outcome says what a legal step did.
type Outcome uint8

const (
	Moved   Outcome = iota + 1 // the transition was taken (possibly to the same state)
	Ignored                    // the spec explicitly ignores the event in this state
)

func (o Outcome) String() string {
	switch o {
	case Moved:
		return "moved"
	case Ignored:
		return "ignored"
	}
	return fmt.Sprintf("Outcome(%d)", uint8(o))
}

// StateInfo describes one state of a machine.
type StateInfo struct {
	Name  string
	Start bool
	Final bool
	Hot   bool // a run must not end here
	Doc   string
}

// EventInfo describes one event of a machine.
type EventInfo struct {
	Name    string
	Payload string // the payload type as spelled in the spec, or ""
	Doc     string
}

// Transition is one declared cell of a machine's table. Ignore transitions
// have To == "".
type Transition struct {
	From, Event, To string
}

// MachineInfo is a machine as declared, for tools (diagrams, explorers, docs).
type MachineInfo struct {
	Name        string
	Doc         string
	States      []StateInfo
	Events      []EventInfo
	Transitions []Transition
}

// InvariantInfo is a named invariant declared in a spec.
type InvariantInfo struct {
	Name string
	Text string
}
