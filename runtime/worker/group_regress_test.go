package worker

import (
	"context"
	"testing"
	"time"

	groupwire "github.com/rrefkit/rref/generated/group"
	"github.com/rrefkit/rref/genrt"
	"github.com/rrefkit/rref/runtime/core"
)

// A peer's group frames after the handshake: a second hello, reports for
// the wrong number of members, truncated and unknown group frames, a frame
// of the group's version byte and nothing else. None is recorded, none
// panics, and the group still works and shuts down.
func TestHostileGroupFrames(t *testing.T) {
	ws, err := NewGroup([]string{"A", "B"}, Config{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	a := ws[0]
	report := func(round uint64, n1, n2 int) []byte {
		return groupwire.AppendFrame(nil, &groupwire.BarrierReport{Round: round, Idle: true, Sent: make([]uint64, n1), Taken: make([]uint64, n2)})
	}
	long := report(1, 2, 2)
	frames := [][]byte{
		groupwire.AppendFrame(nil, &groupwire.Hello{Member: 0}),
		groupwire.AppendFrame(nil, &groupwire.Hello{Member: 1 << 31}),
		report(5, 3, 3), report(6, 1, 2), report(7, 0, 0),
		long[:len(long)-1], append(long, 0),
		{groupwire.FrameVersion}, {groupwire.FrameVersion, 99}, {groupwire.FrameVersion, 0x80},
		append([]byte{groupwire.FrameVersion}, genrt.AppendUvarint(nil, uint64(groupwire.CodeBarrierReport))...),
		groupwire.AppendFrame(nil, &groupwire.Ready{}),
	}
	for _, f := range frames {
		a.takeGroupFrame(2, f)
		a.takeFrame(2, f, a.readies.Get().(*core.Ready))
	}
	a.bar.mu.Lock()
	got := a.bar.reports[1]
	a.bar.mu.Unlock()
	if got != nil {
		t.Errorf("a malformed report was recorded: %+v", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	Register(ws[1], "add", func(ctx context.Context, x [2]int) (int, error) { return x[0] + x[1], nil })
	if v, err := Call[int](ctx, a, "B", "add", [2]int{1, 2}); err != nil || v != 3 {
		t.Fatal(v, err)
	}
	if err := ShutdownGroup(ctx, ws); err != nil {
		t.Fatal(err)
	}
}
