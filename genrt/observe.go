package genrt

import "sync/atomic"

// StepObserver is told of every legal step of every generated machine in
// the process while it is set (SetStepObserver): the machine as declared,
// the state it was in, the event, the state it is in now (the same for an
// ignored event) and what the step did. A model checker counts with it
// which of a spec's transitions its search took (explore's coverage).
// Steps run on many goroutines at once: it must be safe for that, and
// quick, since it runs inside every step.
type StepObserver func(m *MachineInfo, from, event, to int, out Outcome)

var observer atomic.Pointer[StepObserver]

// SetStepObserver makes o the observer (nil: none) and returns the one it
// replaces. Without one, a generated step costs one atomic load more.
func SetStepObserver(o StepObserver) StepObserver {
	var prev *StepObserver
	if o == nil {
		prev = observer.Swap(nil)
	} else {
		prev = observer.Swap(&o)
	}
	if prev == nil {
		return nil
	}
	return *prev
}

// Observing reports whether an observer is set. Generated step functions
// ask it before they call Observe: inlined, it is one atomic load, and
// the arguments are not even computed when no one observes.
func Observing() bool { return observer.Load() != nil }

// Observe tells the observer, if one is set, of a legal step of machine m.
// Generated step functions call it; nothing else needs to.
func Observe(m *MachineInfo, from, event, to int, out Outcome) {
	if o := observer.Load(); o != nil {
		(*o)(m, from, event, to, out)
	}
}
