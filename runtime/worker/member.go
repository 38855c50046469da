package worker

import (
	"fmt"
	"sync/atomic"

	groupwire "github.com/rrefkit/rref/generated/group"
	"github.com/rrefkit/rref/genrt"
)

// memberMachine is the worker's Member machine (spec/group.rspec), the one
// record of whether it runs, leaves by the shutdown barrier, or is closed:
// Shutdown, the barrier's settled and confirmed rounds, Close and the
// group's fence step it through the generated table, so what the worker
// does is what the spec says (and an event the spec does not allow in a
// state is an error, never a silent no-op).
type memberMachine struct{ state atomic.Uint32 }

// step applies e and reports whether the machine moved (false: the spec
// ignores e in the current state). Concurrent steps are ordered by a
// compare-and-swap: each applies to the state the other left.
func (m *memberMachine) step(e groupwire.MemberEvent) (bool, error) {
	for {
		old := m.state.Load()
		next, outcome, err := groupwire.StepMember(groupwire.MemberState(old), e)
		if err != nil {
			return false, err
		}
		if outcome == genrt.Ignored {
			return false, nil
		}
		if m.state.CompareAndSwap(old, uint32(next)) {
			return true, nil
		}
	}
}

// is reports whether the machine is in s.
func (m *memberMachine) is(s groupwire.MemberState) bool {
	return groupwire.MemberState(m.state.Load()) == s
}

// isClosed reports whether the worker has closed, or begun to.
func (w *Worker) isClosed() bool { return w.member.is(groupwire.MemberClosed) }

// isRunning reports whether the worker has neither begun Shutdown nor closed.
func (w *Worker) isRunning() bool { return w.member.is(groupwire.MemberRunning) }

// stepMember steps the worker's machine for a caller that must not see an
// illegal event: one is a bug of the worker's, reported as such.
func (w *Worker) stepMember(e groupwire.MemberEvent) bool {
	moved, err := w.member.step(e)
	if err != nil {
		w.cfg.Logger.Error("rref worker: an event its Member machine does not allow", "worker", w.name, "err", fmt.Errorf("worker: %w", err))
	}
	return moved
}
