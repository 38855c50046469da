package core_test

import (
	"slices"
	"testing"

	"github.com/rrefkit/rref/generated/rref"
	"github.com/rrefkit/rref/runtime/core"
)

// TestMetadataReachesTheRun: a call's and a Remote's metadata cross the
// wire in their frames and come out on the callee's Run as they were sent,
// also for a run that waits for its RRef argument's confirmation, whose
// metadata must then survive the reuse of the frame it came in.
func TestMetadataReachesTheRun(t *testing.T) {
	meta := []rref.MetaEntry{{Key: "traceparent", Value: []byte("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")}, {Key: "tenant", Value: []byte("t1")}}
	a, b, h, _, _ := pair(t) // a holds a confirmed UserRRef owned by b
	c := core.New(3)
	deliverFrame := func(from core.WorkerID, to *core.Core, m rref.Message) []byte {
		t.Helper()
		frame := rref.AppendFrame(nil, m)
		if err := to.DeliverFrame(from, frame, nil); err != nil {
			t.Fatal(err)
		}
		return frame
	}

	if _, err := a.CallWithMeta(3, "f", []byte("x"), nil, 0, meta); err != nil {
		t.Fatal(err)
	}
	deliverFrame(1, c, a.TakeReady().Messages[0].Msg)
	if r := c.TakeReady(); len(r.Runs) != 1 || !equalMeta(r.Runs[0].Meta, meta) {
		t.Fatalf("call's run: %+v", r.Runs)
	}

	if _, err := a.RemoteWithMeta(3, "g", nil, nil, meta); err != nil {
		t.Fatal(err)
	}
	deliverFrame(1, c, a.TakeReady().Messages[0].Msg)
	if r := c.TakeReady(); len(r.Runs) != 1 || r.Runs[0].Kind != core.RunRemote || !equalMeta(r.Runs[0].Meta, meta) {
		t.Fatalf("Remote's run: %+v", r.Runs)
	}

	// An RRef argument from a (owner b) makes the run wait for b's ForkAck.
	if _, err := a.CallWithMeta(3, "f", nil, []core.HandleID{h}, 0, meta); err != nil {
		t.Fatal(err)
	}
	frame := deliverFrame(1, c, a.TakeReady().Messages[0].Msg)
	rc := c.TakeReady()
	if len(rc.Runs) != 0 {
		t.Fatal("the run did not wait for its argument's confirmation")
	}
	clear(frame) // the driver reuses the buffer for the next frame
	var forkReq rref.Message
	for _, m := range rc.Messages {
		if _, ok := m.Msg.(*rref.ForkRequest); ok {
			forkReq = m.Msg
		}
	}
	if err := b.Deliver(3, forkReq); err != nil {
		t.Fatal(err)
	}
	if err := c.Deliver(2, b.TakeReady().Messages[0].Msg); err != nil {
		t.Fatal(err)
	}
	if r := c.TakeReady(); len(r.Runs) != 1 || !equalMeta(r.Runs[0].Meta, meta) {
		t.Fatalf("waiting run: %+v", r.Runs)
	}
}

func equalMeta(a, b []rref.MetaEntry) bool {
	return slices.EqualFunc(a, b, func(x, y rref.MetaEntry) bool { return x.Key == y.Key && string(x.Value) == string(y.Value) })
}
