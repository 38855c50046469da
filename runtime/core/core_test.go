package core_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/rrefkit/rref/generated/rref"
	"github.com/rrefkit/rref/genrt"
	"github.com/rrefkit/rref/runtime/core"
)

// pair is an owner B (2) with a confirmed user A (1) holding one remote value.
func pair(t *testing.T) (a, b *core.Core, h core.HandleID, id rref.RRefID, fork rref.ForkID) {
	t.Helper()
	a, b = core.New(1), core.New(2)
	h, err := a.Remote(2, "identity", []byte("v"), nil)
	if err != nil {
		t.Fatal(err)
	}
	r := a.TakeReady()
	rc := r.Messages[0].Msg.(*rref.RemoteCall)
	if err := b.Deliver(1, rc); err != nil {
		t.Fatal(err)
	}
	rb := b.TakeReady()
	b.CompleteRemote(rc.RRef, rc.Args, core.Failure{})
	b.TakeReady()
	if err := a.Deliver(2, rb.Messages[0].Msg); err != nil {
		t.Fatal(err)
	}
	a.TakeReady()
	return a, b, h, rc.RRef, rc.Fork
}

func wantBad(t *testing.T, c *core.Core, err error, what string) {
	t.Helper()
	wantRefused(t, c, err, what, nil)
}

// wantRefused is wantBad for a message whose refusal is answered: the one
// message sent back must be answer (ForkAck refused, or FetchRet with an
// error), so that an honest sender is not left waiting.
func wantRefused(t *testing.T, c *core.Core, err error, what string, answer func(rref.Message) bool) {
	t.Helper()
	var be *core.BadInputError
	if !errors.Is(err, core.ErrBadInput) || !errors.As(err, &be) {
		t.Fatalf("%s: got %v, want a BadInputError", what, err)
	}
	r := c.TakeReady()
	answered := answer == nil && len(r.Messages) == 0 || answer != nil && len(r.Messages) == 1 && answer(r.Messages[0].Msg)
	if !answered || len(r.Freed) != 0 || len(r.Errors) != 1 || len(r.Fetches) != 0 || len(r.Runs) != 0 {
		t.Fatalf("%s: a refused message changed something: %+v", what, r)
	}
}

func isRefusedAck(m rref.Message) bool {
	a, ok := m.(*rref.ForkAck)
	return ok && a.Refused
}

func isFailedFetch(m rref.Message) bool {
	f, ok := m.(*rref.FetchRet)
	return ok && f.Error != rref.ErrorKindNone && f.Value == nil
}

func TestBadInputIsRefusedWithoutStateChange(t *testing.T) {
	a, b, _, id, fork := pair(t)
	before := b.Dump()
	other := rref.RRefID{Worker: 1, Local: 999}
	wantBad(t, b, b.Deliver(1, &rref.UserDelete{RRef: other, Fork: fork}), "delete for an unknown RRef")
	wantBad(t, b, b.Deliver(1, &rref.UserDelete{RRef: id, Fork: rref.ForkID{Worker: 1, Local: 77}}), "delete for an unknown fork")
	wantBad(t, b, b.Deliver(3, &rref.UserDelete{RRef: id, Fork: fork}), "delete of a fork the sender does not hold")
	wantRefused(t, b, b.Deliver(3, &rref.ForkRequest{RRef: id, Fork: fork, Parent: fork}), "fork request for a fork held by another", isRefusedAck)
	wantRefused(t, b, b.Deliver(3, &rref.FetchCall{FetchID: 1, RRef: id, Fork: fork}), "fetch through another's fork", isFailedFetch)
	wantBad(t, b, b.Deliver(3, &rref.RemoteCall{RRef: rref.RRefID{Worker: 1, Local: 5}, Fork: rref.ForkID{Worker: 1, Local: 6}}), "remote call with ids it did not mint")
	wantBad(t, b, b.Deliver(1, &rref.Call{CallID: 1, RRefs: []rref.RRefDesc{{Owner: 2, RRef: id, Fork: rref.ForkID{Worker: 3, Local: 1}, Parent: fork}}}), "call carrying a fork minted by another")
	wantBad(t, b, b.Deliver(3, &rref.Call{CallID: 1, RRefs: []rref.RRefDesc{{Owner: 1, RRef: id, Fork: rref.ForkID{Worker: 3, Local: 1}, Parent: rref.ForkID(id)}}}), "call claiming to come from the owner")
	wantBad(t, b, b.Deliver(1, &rref.CallRet{CallID: 42}), "reply to a call never made")
	if got := b.Dump(); got != before {
		t.Fatalf("state changed:\n%s\nwas\n%s", got, before)
	}
	beforeA := a.Dump()
	wantBad(t, a, a.Deliver(3, &rref.RemoteRet{RRef: id, Fork: fork}), "RemoteRet from a worker that is not the owner")
	wantBad(t, a, a.Deliver(3, &rref.ForkAck{RRef: id, Fork: fork}), "ForkAck from a worker that is not the owner")
	if got := a.Dump(); got != beforeA {
		t.Fatalf("user state changed:\n%s\nwas\n%s", got, beforeA)
	}
	if n := b.Counters(); n.BadInput != 9 || n.Illegal != 0 {
		t.Fatalf("counters %+v", n)
	}
}

func TestDuplicatesAreCountedNotActedOn(t *testing.T) {
	a, b, h, id, fork := pair(t)
	if err := a.Deliver(2, &rref.RemoteRet{RRef: id, Fork: fork}); err != nil {
		t.Fatal(err)
	}
	if err := a.Deliver(2, &rref.ChildAccept{RRef: id, Child: rref.ForkID{Worker: 1, Local: 50}}); err != nil {
		t.Fatal(err)
	}
	if err := a.Deliver(2, &rref.FetchRet{FetchID: 999, RRef: id}); err != nil {
		t.Fatal(err)
	}
	if n := a.Counters(); n.Duplicates != 3 {
		t.Fatalf("user duplicates %d, want 3", n.Duplicates)
	}
	a.Release(h)
	del := a.TakeReady().Messages[0].Msg
	b.Deliver(1, del)
	if r := b.TakeReady(); len(r.Freed) != 1 {
		t.Fatalf("the delete did not free: %+v", r)
	}
	b.Deliver(1, del)
	b.Deliver(1, &rref.RemoteCall{RRef: id, Fork: fork, Function: "identity"})
	if r := b.TakeReady(); !r.Empty() {
		t.Fatalf("a resent delete or RemoteCall acted: %+v", r)
	}
	if n := b.Counters(); n.Duplicates != 2 || n.Owners != 0 {
		t.Fatalf("owner counters %+v", n)
	}
}

func TestBadFramesAreRefused(t *testing.T) {
	b := core.New(2)
	for _, frame := range [][]byte{nil, {9, 1}, {rref.FrameVersion, 200}, {rref.FrameVersion, byte(rref.CodeUserDelete), 1}} {
		err := b.DeliverFrame(1, frame, nil)
		var de *genrt.DecodeError
		if !errors.Is(err, core.ErrBadInput) || !errors.As(err, &de) {
			t.Errorf("frame %x: got %v", frame, err)
		}
	}
	if n := b.Counters(); n.BadInput != 4 {
		t.Fatalf("bad input %d", n.BadInput)
	}
	good := rref.AppendFrame(nil, &rref.FetchCall{FetchID: 1, RRef: rref.RRefID{Worker: 1, Local: 1}, Fork: rref.ForkID{Worker: 1, Local: 2}})
	if err := b.DeliverFrame(1, good, nil); err != nil {
		t.Fatalf("good frame: %v", err)
	}
}

func TestAPIMisuse(t *testing.T) {
	a, _, h, id, _ := pair(t)
	if err := a.Release(12345); !errors.Is(err, core.ErrUnknownHandle) {
		t.Errorf("release of an unknown handle: %v", err)
	}
	a.Release(h)
	if err := a.Release(h); !errors.Is(err, core.ErrUnknownHandle) {
		t.Errorf("second release: %v", err)
	}
	if _, err := a.Call(2, "f", nil, []core.HandleID{h}); !errors.Is(err, core.ErrUnknownHandle) {
		t.Errorf("passing a released handle: %v", err)
	}
	if err := a.Timeout(h); !errors.Is(err, core.ErrUnknownHandle) {
		t.Errorf("timeout of a released handle: %v", err)
	}
	a.PeerFailed(3)
	if _, err := a.Remote(3, "f", nil, nil); !errors.Is(err, core.ErrPeerDead) {
		t.Errorf("remote to a dead worker: %v", err)
	}
	if _, err := a.Call(3, "f", nil, nil); !errors.Is(err, core.ErrPeerDead) {
		t.Errorf("call to a dead worker: %v", err)
	}
	if err := a.CompleteRemote(id, nil, core.Failure{}); err == nil {
		t.Error("CompleteRemote for a value this worker does not own")
	}
	id2 := a.Fetch(h)
	if r := a.TakeReady(); len(r.Fetches) != 1 || r.Fetches[0].FetchID != id2 || r.Fetches[0].Err != rref.ErrorKindDeleted {
		t.Errorf("fetch of a released handle: %+v", r.Fetches)
	}
}

func TestTombstonesAreBounded(t *testing.T) {
	c := core.New(1, core.WithTombstones(4))
	for i := 0; i < 100; i++ {
		c.Release(c.NewLocal(nil))
	}
	if got := c.Dump(); len(got) > 200 {
		t.Fatalf("tombstones grew past the bound:\n%s", got)
	}
}

func TestDup(t *testing.T) {
	a, b, h, _, _ := pair(t)
	h2, err := a.Dup(h)
	if err != nil {
		t.Fatal(err)
	}
	r := a.TakeReady()
	if len(r.Messages) != 1 {
		t.Fatalf("a user's Dup sends one ForkRequest, got %+v", r.Messages)
	}
	b.Deliver(1, r.Messages[0].Msg)
	ack := b.TakeReady().Messages[0].Msg
	a.Deliver(2, ack)
	accept := a.TakeReady().Messages[0].Msg // ChildAccept to itself
	a.Deliver(1, accept)
	a.TakeReady()
	if !a.Handle(h2).Confirmed {
		t.Fatal("the duplicate is not confirmed")
	}
	a.Release(h)
	a.Release(h2)
	for _, m := range a.TakeReady().Messages {
		b.Deliver(1, m.Msg)
	}
	if r := b.TakeReady(); len(r.Freed) != 1 {
		t.Fatalf("releasing both handles did not free the value: %+v", r)
	}
	o := core.New(3)
	x := o.NewLocal([]byte("v"))
	y, _ := o.Dup(x)
	o.Release(x)
	if r := o.TakeReady(); len(r.Freed) != 0 {
		t.Fatal("freed while a duplicate lives")
	}
	o.Release(y)
	if r := o.TakeReady(); len(r.Freed) != 1 {
		t.Fatal("not freed after both releases")
	}
	if _, err := o.Dup(y); err == nil {
		t.Fatal("Dup of a released handle")
	}
}

// A handle cut off from its value duplicates into a cut handle, as a pass
// to self would: no message goes out (the owner is dead, there is no fork
// to confirm), the duplicate's fetch fails the same way at once, and a
// duplicate of the duplicate too. The worker returns an RRef it keeps by
// duplicating it, so a refusal here failed that return (issue 35).
func TestDupOfCutHandle(t *testing.T) {
	a, _, h, _, _ := pair(t)
	a.PeerFailed(2) // the owner
	a.TakeReady()
	d, err := a.Dup(h)
	if err != nil {
		t.Fatalf("Dup of an orphaned handle: %v", err)
	}
	dd, err := a.Dup(d)
	if err != nil {
		t.Fatalf("Dup of a cut duplicate: %v", err)
	}
	for _, x := range []core.HandleID{d, dd} {
		if s := a.Handle(x); !s.Exists || s.Lost != rref.ErrorKindOwnerFailed || s.Owner != 2 {
			t.Errorf("duplicate %d: %+v, want a cut handle owned by 2 failing with owner-failed", x, s)
		}
		a.Fetch(x)
	}
	r := a.TakeReady()
	if len(r.Messages) != 0 {
		t.Errorf("duplicating a cut handle sent %+v", r.Messages)
	}
	if len(r.Fetches) != 2 || r.Fetches[0].Err != rref.ErrorKindOwnerFailed || r.Fetches[1].Err != rref.ErrorKindOwnerFailed {
		t.Errorf("fetches of the duplicates: %+v, want two owner-failed", r.Fetches)
	}
	for _, x := range []core.HandleID{h, d, dd} {
		if err := a.Release(x); err != nil {
			t.Fatal(err)
		}
	}
	if r := a.TakeReady(); len(r.Messages) != 0 {
		t.Errorf("releasing cut handles sent %+v", r.Messages)
	}
	if n := a.Counters(); !n.Clean() {
		t.Errorf("A keeps %+v after releasing every cut handle\n%s", n, a.Dump())
	}
}

// A Ready passed back to TakeReadyInto is emptied and its memory reused for
// the next outputs; what the core produces is the same as with TakeReady.
func TestTakeReadyIntoReusesBuffers(t *testing.T) {
	a, fresh := core.New(1), core.New(1)
	var rd core.Ready
	var firstMsgs *core.Envelope
	for i := 0; i < 3; i++ {
		if _, err := a.Call(2, "f", []byte{byte(i)}, nil); err != nil {
			t.Fatal(err)
		}
		if _, err := fresh.Call(2, "f", []byte{byte(i)}, nil); err != nil {
			t.Fatal(err)
		}
		a.TakeReadyInto(&rd)
		want := fresh.TakeReady()
		if len(rd.Messages) != 1 || len(want.Messages) != 1 {
			t.Fatalf("round %d: %d messages, want 1", i, len(rd.Messages))
		}
		got, exp := rd.Messages[0].Msg.(*rref.Call), want.Messages[0].Msg.(*rref.Call)
		if got.CallID != exp.CallID || string(got.Args) != string(exp.Args) {
			t.Fatalf("round %d: %+v, TakeReady gives %+v", i, got, exp)
		}
		switch i {
		case 0:
			firstMsgs = &rd.Messages[0]
		case 2:
			// Round 1 handed round 0's slice back to the core; round 2 gets it again.
			if &rd.Messages[0] != firstMsgs {
				t.Errorf("round %d: a new slice, want the one passed back", i)
			}
		}
	}
	if a.HasReady() {
		t.Fatal("outputs left behind")
	}
	rd.Reset()
	if len(rd.Messages) != 0 || cap(rd.Messages) == 0 {
		t.Fatalf("Reset: len %d cap %d, want empty with memory kept", len(rd.Messages), cap(rd.Messages))
	}
	if full := rd.Messages[:1]; full[0].Msg != nil {
		t.Fatal("Reset kept a reference to a sent message")
	}
}

// Messages in a Ready passed back to TakeReadyInto are reused for later
// messages of their type, unless the caller took them out (Msg set to nil).
func TestTakeReadyIntoReusesMessages(t *testing.T) {
	a := core.New(1)
	var rd core.Ready
	call := func() *rref.Call {
		t.Helper()
		if _, err := a.Call(2, "f", []byte("x"), nil); err != nil {
			t.Fatal(err)
		}
		a.TakeReadyInto(&rd)
		return rd.Messages[0].Msg.(*rref.Call)
	}
	first := call()
	call()
	if third := call(); third != first {
		t.Fatalf("a message passed back was not reused")
	}
	kept := call()
	kept.Args = []byte("kept")
	rd.Messages[0].Msg = nil // the caller keeps it, as the worker does for a jittered send
	for i := 0; i < 4; i++ {
		if m := call(); m == kept {
			t.Fatalf("round %d: a message the caller kept was reused", i)
		}
	}
	if string(kept.Args) != "kept" {
		t.Fatalf("a kept message changed: %q", kept.Args)
	}
}

// The owner's checks on a control message (the fork's holder, the record it
// names) cost no allocation: a fetch, a resent fork request and a fetch for
// a freed value, decoded from frames and answered through TakeReadyInto.
func TestControlMessagesAllocateNothing(t *testing.T) {
	_, b, _, id, fork := pair(t)
	frames := [][]byte{
		rref.AppendFrame(nil, &rref.FetchCall{FetchID: 1, RRef: id, Fork: fork}),
		rref.AppendFrame(nil, &rref.ForkRequest{RRef: id, Fork: fork, Parent: rref.ForkID{Worker: 1, Local: 3}}),
		rref.AppendFrame(nil, &rref.FetchCall{FetchID: 2, RRef: rref.RRefID{Worker: 2, Local: 5}, Fork: fork}),
	}
	var rd core.Ready
	for _, f := range frames {
		deliver := func() {
			if err := b.DeliverFrame(1, f, nil); err != nil {
				t.Fatal(err)
			}
			b.TakeReadyInto(&rd)
		}
		deliver() // warm the free lists
		if n := testing.AllocsPerRun(100, deliver); n != 0 {
			t.Errorf("%x: %.1f allocations per message", f, n)
		}
	}
}

// TestErrorsNameWorkersByName: given its driver's names (WithNames), the
// core's errors name workers as the program does, not by index ("call to
// worker 1" meant nothing to a program that named its workers); without
// them, by index.
func TestErrorsNameWorkersByName(t *testing.T) {
	names := []string{"ps", "trainer", "eval"}
	c := core.New(1, core.WithNames(func(id core.WorkerID) string { return names[id-1] }))
	c.PeerFailed(3)
	if _, err := c.Call(3, "f", nil, nil); !errors.Is(err, core.ErrPeerDead) || !strings.Contains(err.Error(), "call to eval") {
		t.Errorf("call to a dead worker: %v, want it named eval", err)
	}
	if _, err := c.Remote(3, "f", nil, nil); !errors.Is(err, core.ErrPeerDead) || !strings.Contains(err.Error(), "remote to eval") {
		t.Errorf("remote to a dead worker: %v, want it named eval", err)
	}
	err := c.Deliver(2, &rref.CallRet{CallID: 99})
	var bad *core.BadInputError
	if !errors.As(err, &bad) || !strings.Contains(err.Error(), "from trainer") || strings.Contains(err.Error(), "worker 2") {
		t.Errorf("a bad reply from worker 2: %v, want it named trainer", err)
	}
	plain := core.New(1)
	if err := plain.Deliver(2, &rref.CallRet{CallID: 99}); err == nil || !strings.Contains(err.Error(), "from worker 2") {
		t.Errorf("without names: %v, want the index", err)
	}
}
