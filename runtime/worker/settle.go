package worker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/rrefkit/rref/runtime/core"
)

// ErrNotSettled is matched (errors.Is) by SettleGroup's error when its
// context ends before the group is quiet.
var ErrNotSettled = errors.New("worker: the group did not settle")

// SettleGroup returns once workers of one group, all in this process, are
// quiet: no protocol frame in flight between any two live members, nothing
// queued to send, no function running, no message held back by jitter, and
// every live member told of every member closed (Close, a crash). It is
// the Shutdown barrier's termination detection (Mattern's four counters)
// with the members' counts read directly instead of reported by frames,
// and quiet in place of idle: members may go on holding references. The
// conformance suite's runtime target settles with it.
//
// The picture must be the same in two successive rounds: a frame taken,
// or a member made busy, between the two changes a count or a flag.
func SettleGroup(ctx context.Context, ws []*Worker) error {
	if len(ws) == 0 {
		return nil
	}
	tick := time.NewTicker(barrierInterval)
	defer tick.Stop()
	var last barrierView
	haveLast := false
	for {
		v, why := settleView(ws)
		ok := why == ""
		if ok {
			ok, why = v.settled(ws[0].id, ws[0].names)
		}
		if ok && haveLast && v.same(last) {
			return nil
		}
		last, haveLast = v, ok
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: %s", ErrNotSettled, why)
		case <-tick.C:
		}
	}
}

// settleView is one round's picture: each live member's counts and
// whether it is quiet, as reports of a barrier round. why, when not
// empty, is a member not yet told of a closed one.
func settleView(ws []*Worker) (barrierView, string) {
	n := len(ws[0].names)
	v := barrierView{reports: make([]*barrierReport, n), dead: make([]bool, n)}
	for i := range v.dead {
		v.dead[i] = true // until a live member answers for the slot
	}
	for _, w := range ws {
		if !w.isClosed() {
			v.dead[w.id-1] = false
		}
	}
	why := ""
	for _, w := range ws {
		if v.dead[w.id-1] {
			continue
		}
		before := w.bar.snapshot()
		quiet := w.localQuiet()
		after := w.bar.snapshot()
		quiet = quiet && slices.Equal(before.sent, after.sent) && slices.Equal(before.taken, after.taken)
		w.mu.Lock()
		for i, dead := range v.dead {
			if dead && core.WorkerID(i+1) != w.id && !w.mourned[core.WorkerID(i+1)] && why == "" {
				why = fmt.Sprintf("%s has not yet learnt that %s closed", w.name, w.names[i])
			}
		}
		w.mu.Unlock()
		r := &barrierReport{idle: quiet, counts: after}
		v.reports[w.id-1] = r
		if w == ws[0] {
			v.self = *r
		}
	}
	if v.dead[ws[0].id-1] {
		// The first member is closed: the picture is told from no one's
		// side in particular, and settled skips the dead slot.
		v.self = barrierReport{}
	}
	return v, why
}

// localQuiet reports whether this worker has nothing to send and nothing
// running: it may still hold references and wait for results.
func (w *Worker) localQuiet() bool {
	if w.flushAllDeferred() {
		return false // sent now: the frames are in flight
	}
	return w.queuedFrames() == 0 && w.running.Load() == 0 && w.jittering.Load() == 0
}
