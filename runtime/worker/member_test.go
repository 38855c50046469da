package worker

import (
	"context"
	"errors"
	"testing"
	"time"

	groupwire "github.com/rrefkit/rref/generated/group"
	"github.com/rrefkit/rref/genrt"
)

// TestMemberMachineSteps: the worker's lifecycle is the spec's Member
// machine: a Close that races the barrier leaves its settled and confirmed
// rounds nothing to do, a second Shutdown is an error, and an event the
// spec forbids is refused, not applied.
func TestMemberMachineSteps(t *testing.T) {
	var m memberMachine
	if moved, err := m.step(groupwire.MemberOnSettled); moved || err == nil {
		t.Fatalf("Settled while running: moved %v, %v; want the spec's refusal", moved, err)
	}
	var te *genrt.TransitionError
	if _, err := m.step(groupwire.MemberOnConfirmed); !errors.As(err, &te) {
		t.Fatalf("Confirmed while running: %v; want a *genrt.TransitionError", err)
	}
	if !m.is(groupwire.MemberRunning) {
		t.Fatal("a refused event moved the machine")
	}
	for _, step := range []struct {
		e     groupwire.MemberEvent
		moved bool
		ok    bool
		then  groupwire.MemberState
	}{
		{groupwire.MemberOnShutdown, true, true, groupwire.MemberLeaving},
		{groupwire.MemberOnShutdown, false, false, groupwire.MemberLeaving}, // a second Shutdown
		{groupwire.MemberOnSettled, true, true, groupwire.MemberLeaving},
		{groupwire.MemberOnClose, true, true, groupwire.MemberClosed}, // a Close racing the barrier
		{groupwire.MemberOnConfirmed, false, true, groupwire.MemberClosed},
		{groupwire.MemberOnFenced, false, true, groupwire.MemberClosed},
		{groupwire.MemberOnClose, false, true, groupwire.MemberClosed},
	} {
		moved, err := m.step(step.e)
		if moved != step.moved || (err == nil) != step.ok || !m.is(step.then) {
			t.Fatalf("%v: moved %v, %v, now %v; want moved %v, ok %v, %v", step.e, moved, err, groupwire.MemberState(m.state.Load()), step.moved, step.ok, step.then)
		}
	}
}

// TestShutdownAfterCloseIsErrClosed: a worker closed (or fenced) refuses
// Shutdown at once rather than running a barrier without its links.
func TestShutdownAfterCloseIsErrClosed(t *testing.T) {
	ws, err := NewGroup([]string{"a", "b"}, Config{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer ws[1].Close()
	ws[0].Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := ws[0].Shutdown(ctx); !errors.Is(err, ErrClosed) {
		t.Fatalf("Shutdown after Close: %v; want ErrClosed", err)
	}
}
