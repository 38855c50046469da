package worker

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	groupwire "github.com/rrefkit/rref/generated/group"
	"github.com/rrefkit/rref/generated/rref"
	"github.com/rrefkit/rref/genrt"
	"github.com/rrefkit/rref/runtime/core"
)

// Shutdown is a barrier across the group. A worker that is idle on its own
// (nothing held, nothing pending) may still be about to receive work: a
// call in flight to it, or a call a peer will make once a message in flight
// to that peer arrives. So every worker in Shutdown tells the others, every
// few milliseconds, whether it is idle and how many protocol frames it has
// sent to and taken from each of them. A worker closes once it has seen, in
// two successive rounds with a fresh report from every live peer in
// between, the same picture: every live worker idle and, for every pair,
// as many frames taken as sent (nothing in flight). This is Mattern's
// four-counter termination detection: a frame in flight, or a worker made
// busy between two reports, changes a count or a flag between the rounds.
//
// Reports travel as frames of the group protocol (spec/group.rspec,
// generated/group) on the same connections: their first byte, the group's
// frame version, is one no RRef frame starts with.

const (
	barrierInterval = 2 * time.Millisecond
	// barrierFanout is how many peers a report round may reach per
	// barrierInterval: every member reports to every other, n² frames a
	// round, so a large group spaces its rounds out rather than flood its
	// links (32 members every 2 ms would be half a million frames a second).
	barrierFanout = 8
)

// barrierPeriod is the time between two report rounds of a group of n.
func barrierPeriod(n int) time.Duration {
	return barrierInterval * time.Duration(max(1, (n+barrierFanout-1)/barrierFanout))
}

// counts are the protocol frames a worker sent to, and took from, each
// member (index id-1), excluding barrier reports.
type counts struct{ sent, taken []uint64 }

// barrierReport is what a worker in Shutdown says of itself.
type barrierReport struct {
	round uint64
	idle  bool
	view  uint64 // the number of the view it holds
	counts
}

// barrier is a worker's side of the Shutdown barrier.
type barrier struct {
	sent, taken []atomic.Uint64 // index id-1

	mu      sync.Mutex
	reports []*barrierReport // index id-1: the latest report from each peer
}

func newBarrier(n int) barrier {
	return barrier{sent: make([]atomic.Uint64, n), taken: make([]atomic.Uint64, n), reports: make([]*barrierReport, n)}
}

func (b *barrier) snapshot() counts {
	c := counts{sent: make([]uint64, len(b.sent)), taken: make([]uint64, len(b.taken))}
	for i := range b.sent {
		c.sent[i], c.taken[i] = b.sent[i].Load(), b.taken[i].Load()
	}
	return c
}

// appendBarrier appends r as a group protocol frame (spec/group.rspec),
// through the report's own generated encoder: the frame's interface would
// make the report escape to the heap.
func appendBarrier(b []byte, r barrierReport) []byte {
	m := groupwire.BarrierReport{Round: r.round, Idle: r.idle, Sent: r.sent, Taken: r.taken, View: r.view}
	b = append(b, groupwire.FrameVersion)
	b = genrt.AppendUvarint(b, uint64(groupwire.CodeBarrierReport))
	return groupwire.AppendBarrierReport(b, &m)
}

var errBadBarrier = errors.New("worker: malformed shutdown barrier report")

// consumeBarrier decodes a report of a group of members.
func consumeBarrier(b []byte, members int) (barrierReport, error) {
	code, body, err := groupwire.DecodeHeader(b, &genrt.DefaultLimits)
	if err != nil {
		return barrierReport{}, fmt.Errorf("%w: %w", errBadBarrier, err)
	}
	if code != groupwire.CodeBarrierReport {
		return barrierReport{}, fmt.Errorf("%w: a %v frame", errBadBarrier, code)
	}
	m, n, err := groupwire.ConsumeBarrierReport(body, &genrt.DefaultLimits)
	if err == nil && n != len(body) {
		err = fmt.Errorf("%d trailing bytes", len(body)-n)
	}
	if err != nil {
		return barrierReport{}, fmt.Errorf("%w: %w", errBadBarrier, err)
	}
	return reportOf(&m, members)
}

// reportOf checks a decoded report against the group's size.
func reportOf(m *groupwire.BarrierReport, members int) (barrierReport, error) {
	if len(m.Sent) != members || len(m.Taken) != members {
		return barrierReport{}, fmt.Errorf("%w: counts for %d and %d members, the group has %d", errBadBarrier, len(m.Sent), len(m.Taken), members)
	}
	return barrierReport{round: m.Round, idle: m.Idle, view: m.View, counts: counts{sent: m.Sent, taken: m.Taken}}, nil
}

// takeBarrier records a peer's report.
func (w *Worker) takeBarrier(from core.WorkerID, m *groupwire.BarrierReport) {
	r, err := reportOf(m, len(w.names))
	if err != nil {
		w.cfg.Logger.Warn("rref shutdown barrier", "worker", w.name, "from", w.nameOf(from), "err", err)
		return
	}
	w.bar.mu.Lock()
	if old := w.bar.reports[from-1]; old == nil || r.round > old.round {
		w.bar.reports[from-1] = &r
	}
	w.bar.mu.Unlock()
}

// localIdle reports whether this worker holds nothing and waits for
// nothing: quiet (localQuiet), with no reference and no call or fetch
// pending.
func (w *Worker) localIdle() bool {
	if !w.localQuiet() {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.c.Counters().Clean() && w.calls.len() == 0 && w.fetches.len() == 0
}

// barrierView is one round's picture of the group: this worker's own
// report and the latest from each peer, with the peers dead by now.
type barrierView struct {
	self    barrierReport
	reports []*barrierReport
	dead    []bool
}

// settled reports whether the view shows every live member idle and no
// frame in flight between live members; otherwise it says who holds it up.
func (v barrierView) settled(me core.WorkerID, names []string) (bool, string) {
	rep := func(i int) *barrierReport {
		if i == int(me)-1 {
			return &v.self
		}
		return v.reports[i]
	}
	// Members first: a busy member is the cause of the frames still in
	// flight to it (a call it runs is taken once its function returns),
	// and the one to name.
	for i := range names {
		if v.dead[i] {
			continue
		}
		switch r := rep(i); {
		case r == nil:
			return false, fmt.Sprintf("%s has not called Shutdown", names[i])
		case r.view != v.self.view:
			// A member joined, left or was removed between the reports:
			// the picture is of two memberships, and one may miss a
			// member still busy.
			return false, fmt.Sprintf("%s reported in view #%d, %s is in view #%d", names[i], r.view, names[me-1], v.self.view)
		case !r.idle:
			return false, fmt.Sprintf("%s still holds references, waits for results or runs functions", names[i])
		}
	}
	for i := range names {
		if v.dead[i] {
			continue
		}
		r := rep(i)
		for j := range names {
			if j == i || v.dead[j] {
				continue
			}
			if rj := rep(j); rj != nil && r.sent[j] != rj.taken[i] {
				return false, fmt.Sprintf("%s from %s to %s not yet taken", count(int(int64(r.sent[j])-int64(rj.taken[i])), "frame"), names[i], names[j])
			}
		}
	}
	return true, ""
}

func (v barrierView) same(o barrierView) bool {
	eq := func(a, b *barrierReport) bool {
		return (a == nil) == (b == nil) && (a == nil || a.idle == b.idle && a.view == b.view && slices.Equal(a.sent, b.sent) && slices.Equal(a.taken, b.taken))
	}
	if !eq(&v.self, &o.self) || !slices.Equal(v.dead, o.dead) {
		return false
	}
	for i := range v.reports {
		if !eq(v.reports[i], o.reports[i]) {
			return false
		}
	}
	return true
}

// fresher reports whether every live peer has reported since o.
func (v barrierView) fresher(o barrierView, me core.WorkerID) bool {
	for i, r := range v.reports {
		if i == int(me)-1 || v.dead[i] {
			continue
		}
		if r == nil || o.reports[i] == nil || r.round <= o.reports[i].round {
			return false
		}
	}
	return true
}

// barrierRound takes this worker's report, sends it to every live peer
// and returns the round's view.
func (w *Worker) barrierRound(ctx context.Context, round uint64) barrierView {
	// Counts read on both sides of the idle check: a frame taken meanwhile
	// makes this round not idle.
	before := w.bar.snapshot()
	idle := w.localIdle()
	after := w.bar.snapshot()
	idle = idle && slices.Equal(before.sent, after.sent) && slices.Equal(before.taken, after.taken)
	v := barrierView{self: barrierReport{round: round, idle: idle, counts: after}}
	frame := appendBarrier(nil, v.self)
	w.mu.Lock()
	v.dead = make([]bool, len(w.names))
	for i := range w.names {
		v.dead[i] = w.dead[core.WorkerID(i+1)]
	}
	w.mu.Unlock()
	for i := range w.peers {
		conn := w.peers[i].Load()
		if conn == nil || v.dead[i] {
			continue
		}
		if err := conn.Send(ctx, frame); err != nil && ctx.Err() == nil && !w.isClosed() {
			w.peerFailed(core.WorkerID(i+1), err)
		}
	}
	w.bar.mu.Lock()
	v.reports = make([]*barrierReport, len(w.bar.reports))
	for i, r := range w.bar.reports {
		if r != nil {
			c := *r
			v.reports[i] = &c
		}
	}
	w.bar.mu.Unlock()
	return v
}

// Shutdown closes this worker once the whole group is done: it is a
// barrier, so call it on every worker (ShutdownGroup does, for workers of
// one process). It returns when this worker holds no reference (no owner,
// fork, pending user or child), no call or fetch is pending, no function
// it runs is still running, nothing waits to be sent, and the same holds
// for every live peer with no protocol message in flight between any two
// of them; then it closes the worker.
// If ctx ends first, it closes anyway and returns a *LeakError that lists
// every RRef and fork this worker still held and what held the group up.
func (w *Worker) Shutdown(ctx context.Context) error { return w.shutdown(ctx, nil) }

// shutdown is Shutdown; before closing, it calls beforeClose (when set),
// telling it whether it gave up (and took its report) or settled.
func (w *Worker) shutdown(ctx context.Context, beforeClose func(gaveUp bool)) error {
	if _, err := w.member.step(groupwire.MemberOnShutdown); err != nil {
		if w.isClosed() {
			return w.closedErr()
		}
		return fmt.Errorf("worker: %s: Shutdown is already running: %w", w.name, err)
	}
	tick := time.NewTicker(barrierPeriod(len(w.names)))
	defer tick.Stop()
	var last barrierView
	haveLast := false
	for round := uint64(1); ; round++ {
		v := w.barrierRound(ctx, round)
		ok, why := v.settled(w.id, w.names)
		if ok && haveLast && v.same(last) && v.fresher(last, w.id) {
			if beforeClose != nil {
				beforeClose(false)
			}
			if w.stepMember(groupwire.MemberOnConfirmed) {
				w.teardown()
			}
			return nil
		}
		if ok && !(haveLast && v.same(last)) {
			w.stepMember(groupwire.MemberOnSettled)
			last, haveLast = v, true // the first settled view; confirm it next rounds
		} else if !ok {
			haveLast = false
		}
		if ctx.Err() != nil {
			le := w.leakError()
			// Why this worker is busy, when it is, is better said by it
			// than by the picture of the group (which has only its idle bit).
			if !v.self.idle && len(le.Held) == 0 && len(le.Running) > 0 {
				why = fmt.Sprintf("%s runs %s", w.name, count(len(le.Running), "function"))
			}
			if beforeClose != nil {
				beforeClose(true)
			}
			w.Close()
			if why == "" {
				why = "the group did not confirm it was settled"
			}
			le.Waiting = why
			return le
		}
		select {
		case <-ctx.Done():
		case <-tick.C:
		}
	}
}

// ShutdownGroup shuts down workers of this process together (Shutdown is a
// barrier: one at a time would wait for the next forever) and joins their
// errors. A worker that gives up closes only once every other has settled
// or taken its report too: one closing first would show its peers a death,
// and their reports would miss what it held. (One that settles closes at
// once: it holds nothing, and its peers' barrier rounds need it to go on
// answering until then, not to wait.)
func ShutdownGroup(ctx context.Context, ws []*Worker) error {
	errs := make([]error, len(ws))
	var wg, reported sync.WaitGroup
	reported.Add(len(ws))
	arrive := func(gaveUp bool) {
		reported.Done()
		if gaveUp {
			reported.Wait()
		}
	}
	for i, w := range ws {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = w.shutdown(ctx, arrive)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// describe is the LeakError's text: what this worker held and the
// functions it still ran, one line each; what held the barrier up only
// when it held nothing.
func (e *LeakError) describe() string {
	var b strings.Builder
	if len(e.Held) == 0 {
		fmt.Fprintf(&b, "worker %s: shutdown barrier not settled: %s", e.Worker, e.Waiting)
	} else {
		fmt.Fprintf(&b, "worker %s: references still held at shutdown:", e.Worker)
		e.describeHeld(&b)
	}
	if len(e.Running) > 0 {
		b.WriteString("\n  " + describeRunning(e.Running, e.at, "\n  "))
	}
	return b.String()
}

// describeHeld writes a line for each reference held.
func (e *LeakError) describeHeld(b *strings.Builder) {
	for _, h := range e.Held {
		b.WriteString("\n  ")
		switch h.Kind {
		case HeldValue:
			fmt.Fprintf(b, "value %s = %s", h.RRef, h.Value)
			if len(h.Holders) > 0 {
				fmt.Fprintf(b, ", kept alive by %s", strings.Join(h.Holders, ", "))
			}
		case HeldReference:
			fmt.Fprintf(b, "reference to value %s on %s", h.RRef, h.Owner)
			if !h.Confirmed {
				b.WriteString(" (not yet confirmed by its owner)")
			}
		case HeldLent:
			fmt.Fprintf(b, "reference to value %s on %s lent to %s, until %s confirms the copy", h.RRef, h.Owner, h.To, h.Owner)
		}
	}
}

// runningAge rounds how long a function has run, in a report.
const runningAge = time.Millisecond

// describeRunning is one line per running function, joined by sep: its
// name, its caller, and since when (and for how long, at time at, when
// known).
func describeRunning(fns []RunningFunction, at time.Time, sep string) string {
	lines := make([]string, len(fns))
	for i, f := range fns {
		what := "function %s, called by %s, running since %s"
		if f.Remote {
			what = "function %s, making the value of a Remote by %s, running since %s"
		}
		lines[i] = fmt.Sprintf(what, f.Function, f.Caller, f.Since.Format("15:04:05.000"))
		if !at.IsZero() {
			lines[i] += fmt.Sprintf(" (%v)", at.Sub(f.Since).Round(runningAge))
		}
	}
	return strings.Join(lines, sep)
}

// runningFunctions lists the functions this worker runs, oldest first
// (w.mu held).
func (w *Worker) runningFunctions() []RunningFunction {
	var out []RunningFunction
	add := func(r running, remote bool) {
		name, _, _ := splitWireName(r.fn)
		out = append(out, RunningFunction{Function: name, Caller: w.nameOf(r.from), Remote: remote, Since: monoEpoch.Add(r.since)})
	}
	for _, first := range w.calling {
		for c := first; c != nil; c = c.next {
			add(c.run, false)
		}
	}
	for _, r := range w.remotes {
		add(r, true)
	}
	slices.SortFunc(out, func(a, b RunningFunction) int { return a.Since.Compare(b.Since) })
	return out
}

// leakError describes what this worker holds now.
func (w *Worker) leakError() *LeakError {
	w.mu.Lock()
	defer w.mu.Unlock()
	le := &LeakError{Worker: w.name, State: w.c.Dump(), Running: w.runningFunctions(), at: time.Now()}
	for _, h := range w.c.Held() {
		ref := HeldRef{RRef: w.shortID(h.RRef), Owner: w.nameOf(h.Owner), Confirmed: h.Confirmed, To: w.nameOf(h.To)}
		switch h.Kind {
		case core.HeldValue:
			ref.Kind = HeldValue
			ref.Value = w.describeValue(h.RRef, h.Value)
			if h.Failed != rref.ErrorKindNone {
				ref.Value = fmt.Sprintf("(its function failed: %s %s)", h.Failed, h.FailMsg)
			}
			if h.Local > 0 {
				ref.Holders = append(ref.Holders, w.name+"'s program")
			}
			for _, holder := range h.Holders {
				ref.Holders = append(ref.Holders, w.nameOf(holder))
			}
		case core.HeldReference:
			ref.Kind = HeldReference
		case core.HeldPin:
			ref.Kind = HeldLent
		}
		le.Held = append(le.Held, ref)
	}
	return le
}

// shortIDDigits is how many hex digits of a value's 64-bit number name it
// in reports: enough to tell a group's live values apart at a glance.
const shortIDDigits = 6

// shortID names a value by its creator and the first digits of its number.
func (w *Worker) shortID(id core.RRefID) string {
	return fmt.Sprintf("%s:%0*x", w.nameOf(id.Worker), shortIDDigits, id.Local>>(64-4*shortIDDigits))
}

// describeValue is a value as a report shows it: decoded with its type
// when this worker knows it, else its size. w.mu is held.
func (w *Worker) describeValue(id core.RRefID, b []byte) string {
	const maxShown = 60 // a report line, not the value's dump
	if b == nil {
		if r, ok := w.remotes[id]; ok {
			name, _, _ := splitWireName(r.fn)
			return "(not yet created: function " + name + " still running)"
		}
		return "(not yet created)"
	}
	if t := w.values[id].typ; t != nil {
		v := reflect.New(t)
		if w.cfg.Codec.Unmarshal(b, v.Interface()) == nil {
			s := fmt.Sprintf("%#v", v.Elem().Interface())
			if len(s) > maxShown {
				s = s[:maxShown] + "..."
			}
			return s
		}
	}
	return fmt.Sprintf("(%d bytes)", len(b))
}

// count is n and noun, plural unless n is one.
func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
