package worker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rrefkit/rref/fifo"
	groupwire "github.com/rrefkit/rref/generated/group"
	"github.com/rrefkit/rref/runtime/core"
)

// One verdict on death. Each link decides its peer's death on its own: over
// shared memory a heartbeat that stops for DeadAfter, over tcp the kernel's
// keepalives or a connection not restored within DeadAfter. A member paused
// past DeadAfter can thus be dead for its shm peers and alive for a tcp
// peer whose kernel kept acknowledging; the core's reclaiming assumes every
// member learns of each death, and a member that never did kept values
// alive for the fenced one, and held references its owner would never
// confirm. So a worker that takes a peer for dead tells every other member
// (a Fence frame, spec/group.rspec), each fences it in turn and tells the
// rest, and the member is fenced by the whole group. The fenced member, if
// it hears of it, closes.

// ErrFenced: the group fenced this worker (its peers took it for dead,
// and reclaimed its references). It matches the error of a call made on a
// worker that was fenced, and is what Config.OnFenced hears.
var ErrFenced = errors.New("worker: fenced by the group")

// FencedError is why a worker fenced a peer it still had a link to: another
// member fenced it first. It matches ErrPeerFailed.
type FencedError struct {
	Member string // the member fenced
	By     string // the member that told this one
	Reason string // why the first member to fence it did so
}

func (e *FencedError) Error() string {
	return fmt.Sprintf("worker: %s fenced by the group (told by %s): %s", e.Member, e.By, e.Reason)
}

func (e *FencedError) Is(target error) bool { return target == ErrPeerFailed }

// announceFence tells the members this worker still reaches that it has
// fenced member id. The fenced member is told too, at once and without
// waiting (it may be paused, with a full ring), just before its link
// closes: if it is alive, it learns it is out of the group.
func (w *Worker) announceFence(id core.WorkerID, cause error) {
	frame := groupwire.AppendFrame(nil, &groupwire.Fence{Member: uint32(id - 1), Reason: cause.Error()})
	if conn := w.conn(id); conn != nil {
		conn.TrySend(frame) // best effort: the link is closing
	}
	for i := range w.peers {
		peer := core.WorkerID(i + 1)
		conn := w.peers[i].Load()
		if peer == w.id || peer == id || conn == nil || w.peerIsFailed(peer) {
			continue
		}
		w.gs.start(func() {
			// Bounded as the link itself: a peer that does not take it
			// within DeadAfter is failing on its own.
			ctx, cancel := context.WithTimeout(w.ctx, w.deadAfter())
			defer cancel()
			if err := conn.Send(ctx, frame); err != nil && w.ctx.Err() == nil {
				w.cfg.Logger.Warn("rref fence not delivered", "worker", w.name, "to", w.nameOf(peer), "fenced", w.nameOf(id), "err", err)
			}
		})
	}
}

// deadAfter is the transport's liveness bound.
func (w *Worker) deadAfter() time.Duration {
	if d := w.cfg.FIFO.DeadAfter; d > 0 {
		return d
	}
	return fifo.DefaultDeadAfter
}

// takeFence acts on a peer's Fence frame.
func (w *Worker) takeFence(from core.WorkerID, m *groupwire.Fence) {
	if int64(m.Member) >= int64(len(w.names)) {
		w.cfg.Logger.Warn("rref group frame", "worker", w.name, "from", w.nameOf(from), "err", fmt.Errorf("a fence of member #%d in a group of %d", m.Member, len(w.names)))
		return
	}
	target := core.WorkerID(m.Member + 1)
	switch target {
	case w.id:
		w.fencedSelf(from, m.Reason)
	case from:
		w.cfg.Logger.Warn("rref group frame", "worker", w.name, "from", w.nameOf(from), "err", errors.New("a member fenced itself"))
	default:
		w.peerFailed(target, &FencedError{Member: w.nameOf(target), By: w.nameOf(from), Reason: m.Reason})
	}
}

// fencedSelf closes a worker the group fenced: its references were
// reclaimed by its peers, and it must not run on split from them.
func (w *Worker) fencedSelf(by core.WorkerID, reason string) {
	err := fmt.Errorf("%w: %s took it for dead: %s", ErrFenced, w.nameOf(by), reason)
	// Recorded before the machine closes, so that every call refused from
	// then on says why (closedErr), not only that the worker is closed.
	w.fenceErr.CompareAndSwap(nil, &err)
	if !w.stepMember(groupwire.MemberOnFenced) {
		w.fenceErr.CompareAndSwap(&err, nil) // closed before: not by the fence
		return
	}
	w.cfg.Logger.Error("rref worker fenced by the group; closing", "worker", w.name, "err", err)
	if f := w.cfg.OnFenced; f != nil {
		f(err)
	}
	// teardown waits for the worker's goroutines, of which this is one.
	go w.teardown()
}

// closedErr is why a closed worker refuses a call: ErrClosed, and, when the
// group fenced it, ErrFenced with who said so (both match).
func (w *Worker) closedErr() error {
	if e := w.fenceErr.Load(); e != nil {
		return fmt.Errorf("%w (%w)", ErrClosed, *e)
	}
	return ErrClosed
}
