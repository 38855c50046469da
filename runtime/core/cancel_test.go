package core_test

import (
	"testing"

	"github.com/rrefkit/rref/generated/rref"
	"github.com/rrefkit/rref/runtime/core"
)

// TestCancelBeforeTheRunStarts: a call whose RRef argument the owner has
// not confirmed yet waits in the core; a cancel from its caller then marks
// it, so it is handed out cancelled once confirmed, and no Cancel for an
// unknown run reaches the driver. A cancel from another worker, or for a
// call no one waits on, goes to the driver, which knows none of them.
func TestCancelBeforeTheRunStarts(t *testing.T) {
	a, b, h, _, _ := pair(t) // a holds a confirmed UserRRef owned by b
	c := core.New(3)
	id, err := a.CallWithin(3, "f", nil, []core.HandleID{h}, 0)
	if err != nil {
		t.Fatal(err)
	}
	call := a.TakeReady().Messages[0].Msg.(*rref.Call)
	if err := c.Deliver(1, call); err != nil {
		t.Fatal(err)
	}
	rc := c.TakeReady()
	if len(rc.Runs) != 0 {
		t.Fatal("the run did not wait for its argument's confirmation")
	}
	var forkReq *rref.ForkRequest
	for _, m := range rc.Messages {
		if fr, ok := m.Msg.(*rref.ForkRequest); ok {
			forkReq = fr
		}
	}
	if err := c.Deliver(2, &rref.CallCancel{CallID: id + 100}); err != nil {
		t.Fatal(err)
	}
	if r := c.TakeReady(); len(r.Cancels) != 1 || r.Cancels[0] != (core.Cancel{From: 2, CallID: id + 100}) {
		t.Fatalf("a cancel for no pending run: %+v", r.Cancels)
	}
	a.CancelCall(id)
	cancel := a.TakeReady().Messages[0].Msg.(*rref.CallCancel)
	if err := c.Deliver(1, cancel); err != nil {
		t.Fatal(err)
	}
	if r := c.TakeReady(); len(r.Cancels) != 0 {
		t.Fatalf("a pending run's cancel went to the driver: %+v", r.Cancels)
	}
	if err := b.Deliver(3, forkReq); err != nil {
		t.Fatal(err)
	}
	ack := b.TakeReady().Messages[0].Msg
	if err := c.Deliver(2, ack); err != nil {
		t.Fatal(err)
	}
	r := c.TakeReady()
	if len(r.Runs) != 1 || !r.Runs[0].Cancelled || r.Runs[0].CallID != id {
		t.Fatalf("runs after confirmation: %+v", r.Runs)
	}
	a.CancelCall(id + 1) // never made: nothing is sent
	if r := a.TakeReady(); len(r.Messages) != 0 {
		t.Fatalf("a cancel of an unknown call sent %v", r.Messages)
	}
}
