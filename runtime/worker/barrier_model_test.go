package worker

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/rrefkit/rref/explore"
	groupwire "github.com/rrefkit/rref/generated/group"
	"github.com/rrefkit/rref/runtime/core"
)

// The shutdown barrier is a distributed protocol of its own (termination
// detection): this model runs the barrier's real decisions (barrierView's
// settled, same and fresher) in members whose reports and work travel
// over FIFO links in any interleaving, and explore checks every order
// against the group protocol's invariants: a member closes by the barrier
// only when every member is idle and no work frame is in flight
// (Termination), and no work frame reaches a closed member (NoLostFrame).

// barrierFrame is a frame on a link: a report, or a frame of work (a call,
// a protocol message) that makes its receiver busy.
type barrierFrame struct {
	report *barrierReport
}

type modelMember struct {
	state    groupwire.MemberState
	busy     bool // work to finish: it may send work on
	budget   int  // work frames it may still send
	rounds   int  // barrier rounds it may still take (the model's bound)
	round    uint64
	sent     []uint64
	taken    []uint64
	reports  []*barrierReport // index id-1: the newest report from each peer
	last     barrierView
	haveLast bool
}

type barrierModel struct {
	names   []string
	members []modelMember
	links   [][][]barrierFrame // [from][to]: FIFO, as the transport's links
	// blind is the seeded bug: settle on the members' idle flags alone,
	// without the frame counts.
	blind     bool
	violation *explore.Violation
}

func newBarrierModel(n, work, rounds int, blind bool) *barrierModel {
	m := &barrierModel{blind: blind}
	for i := range n {
		m.names = append(m.names, fmt.Sprintf("W%d", i+1))
	}
	m.links = make([][][]barrierFrame, n)
	for i := range n {
		m.links[i] = make([][]barrierFrame, n)
		st, _, _ := groupwire.StepMember(groupwire.MemberStart, groupwire.MemberOnShutdown)
		m.members = append(m.members, modelMember{state: st, rounds: rounds,
			sent: make([]uint64, n), taken: make([]uint64, n), reports: make([]*barrierReport, n)})
	}
	// The first member still works when Shutdown begins: it will pass work
	// on, which may come back.
	m.members[0].busy, m.members[0].budget = true, work
	if n > 1 {
		m.members[1].budget = work
	}
	return m
}

// Choices: per member, a barrier round (0), finishing its work silently
// (1) or by sending work to a peer (2+j); per link, delivering its head.
const (
	choiceRound = iota
	choiceFinish
	choiceSend
)

func (m *barrierModel) n() int { return len(m.members) }

func (m *barrierModel) encode(member, kind, arg int) int {
	return (member*(choiceSend+m.n())+kind+arg)*2 + 0
}

func (m *barrierModel) Choices() []int {
	var out []int
	n := m.n()
	for i, mb := range m.members {
		if mb.state == groupwire.MemberClosed {
			continue
		}
		if mb.rounds > 0 {
			out = append(out, m.encode(i, choiceRound, 0))
		}
		if mb.busy {
			out = append(out, m.encode(i, choiceFinish, 0))
			if mb.budget > 0 {
				for j := range n {
					if j != i && m.members[j].state != groupwire.MemberClosed {
						out = append(out, m.encode(i, choiceSend, j))
					}
				}
			}
		}
	}
	for i := range n {
		for j := range n {
			if len(m.links[i][j]) > 0 {
				out = append(out, (i*n+j)*2+1)
			}
		}
	}
	return out
}

func (m *barrierModel) decode(c int) (member, kind, arg int) {
	c /= 2
	per := choiceSend + m.n()
	member, rest := c/per, c%per
	if rest < choiceSend {
		return member, rest, 0
	}
	return member, choiceSend, rest - choiceSend
}

func (m *barrierModel) Describe(c int) string {
	if c%2 == 1 {
		i, j := (c/2)/m.n(), (c/2)%m.n()
		what := "work"
		if m.links[i][j][0].report != nil {
			what = fmt.Sprintf("report round %d", m.links[i][j][0].report.round)
		}
		return fmt.Sprintf("deliver %s -> %s: %s", m.names[i], m.names[j], what)
	}
	i, kind, j := m.decode(c)
	switch kind {
	case choiceRound:
		return m.names[i] + " takes a barrier round"
	case choiceFinish:
		return m.names[i] + " finishes its work"
	}
	return fmt.Sprintf("%s finishes by sending work to %s", m.names[i], m.names[j])
}

func (m *barrierModel) ChoiceKey(c int) string { return m.Describe(c) }

func (m *barrierModel) Step(c int) {
	if c%2 == 1 {
		m.deliver((c/2)/m.n(), (c/2)%m.n())
		return
	}
	i, kind, j := m.decode(c)
	mb := &m.members[i]
	switch kind {
	case choiceRound:
		m.round(i)
	case choiceFinish:
		mb.busy = false
	case choiceSend:
		mb.busy = false
		mb.budget--
		mb.sent[j]++
		m.links[i][j] = append(m.links[i][j], barrierFrame{})
	}
}

func (m *barrierModel) deliver(i, j int) {
	f := m.links[i][j][0]
	m.links[i][j] = m.links[i][j][1:]
	to := &m.members[j]
	if to.state == groupwire.MemberClosed {
		if f.report == nil {
			m.fail(groupwire.InvariantNoLostFrame, "work from %s reached %s, which the barrier closed", m.names[i], m.names[j])
		}
		return
	}
	if f.report != nil {
		if old := to.reports[i]; old == nil || f.report.round > old.round {
			to.reports[i] = f.report
		}
		return
	}
	to.taken[i]++
	to.busy = true
}

// round is Shutdown's loop body for member i, on the real decisions.
func (m *barrierModel) round(i int) {
	mb := &m.members[i]
	mb.rounds--
	mb.round++
	self := barrierReport{round: mb.round, idle: !mb.busy, counts: counts{sent: slices.Clone(mb.sent), taken: slices.Clone(mb.taken)}}
	v := barrierView{self: self, reports: make([]*barrierReport, m.n()), dead: make([]bool, m.n())}
	for j := range m.n() {
		v.dead[j] = m.members[j].state == groupwire.MemberClosed && j != i
		if j != i && !v.dead[j] {
			r := self
			m.links[i][j] = append(m.links[i][j], barrierFrame{report: &r})
		}
		if r := mb.reports[j]; r != nil {
			c := *r
			v.reports[j] = &c
		}
	}
	me := core.WorkerID(i + 1)
	ok, _ := v.settled(me, m.names)
	if m.blind {
		ok = v.allIdle(i)
	}
	if ok {
		mb.state = m.step(mb.state, groupwire.MemberOnSettled)
	}
	if ok && mb.haveLast && v.same(mb.last) && v.fresher(mb.last, me) {
		m.closing(i)
		return
	}
	if ok && !(mb.haveLast && v.same(mb.last)) {
		mb.last, mb.haveLast = v, true
	} else if !ok {
		mb.haveLast = false
	}
}

// closing checks Termination as member i closes by the barrier.
func (m *barrierModel) closing(i int) {
	m.members[i].state = m.step(m.members[i].state, groupwire.MemberOnConfirmed)
	for j, o := range m.members {
		if o.state != groupwire.MemberClosed && o.busy {
			m.fail(groupwire.InvariantTermination, "%s closed while %s was busy", m.names[i], m.names[j])
			return
		}
	}
	for a := range m.n() {
		for b := range m.n() {
			for _, f := range m.links[a][b] {
				if f.report == nil && m.members[b].state != groupwire.MemberClosed {
					m.fail(groupwire.InvariantTermination, "%s closed with work in flight from %s to %s", m.names[i], m.names[a], m.names[b])
					return
				}
			}
		}
	}
}

func (m *barrierModel) step(s groupwire.MemberState, e groupwire.MemberEvent) groupwire.MemberState {
	next, _, err := groupwire.StepMember(s, e)
	if err != nil {
		m.fail("spec", "%v", err)
	}
	return next
}

func (m *barrierModel) fail(inv, format string, args ...any) {
	if m.violation == nil {
		m.violation = &explore.Violation{Invariant: inv, Detail: fmt.Sprintf(format, args...)}
	}
}

func (m *barrierModel) Violation() *explore.Violation { return m.violation }

// CheckEnd: rounds are bounded, so a run may end before the barrier
// completes; the model checks safety only.
func (m *barrierModel) CheckEnd() {}

func (m *barrierModel) Clone() *barrierModel {
	n := *m
	n.members = slices.Clone(m.members)
	for i := range n.members {
		mb := &n.members[i]
		mb.sent, mb.taken, mb.reports = slices.Clone(mb.sent), slices.Clone(mb.taken), slices.Clone(mb.reports)
	}
	n.links = make([][][]barrierFrame, len(m.links))
	for i := range m.links {
		n.links[i] = make([][]barrierFrame, len(m.links[i]))
		for j := range m.links[i] {
			n.links[i][j] = slices.Clone(m.links[i][j])
		}
	}
	return &n
}

func (m *barrierModel) AppendState(b []byte) []byte {
	rep := func(r *barrierReport) {
		if r == nil {
			b = append(b, '-')
			return
		}
		b = fmt.Appendf(b, "%d/%v/%v/%v;", r.round, r.idle, r.sent, r.taken)
	}
	for _, mb := range m.members {
		b = fmt.Appendf(b, "%d %v %d %d %d %v %v|", mb.state, mb.busy, mb.budget, mb.rounds, mb.round, mb.sent, mb.taken)
		for _, r := range mb.reports {
			rep(r)
		}
		b = append(b, '|')
		if mb.haveLast {
			rep(&mb.last.self)
			for _, r := range mb.last.reports {
				rep(r)
			}
			b = fmt.Appendf(b, "%v", mb.last.dead)
		}
		b = append(b, '#')
	}
	for i := range m.links {
		for j := range m.links[i] {
			for _, f := range m.links[i][j] {
				rep(f.report)
			}
			b = append(b, '/')
		}
	}
	return b
}

// TestBarrierNeverClosesEarly explores every interleaving of two members'
// barrier rounds, reports and work (three with RREF_LONG set): no member
// closes while work is in flight or a member is busy, and no work reaches
// a closed member.
func TestBarrierNeverClosesEarly(t *testing.T) {
	cases := []struct{ members, work, rounds int }{{2, 2, 3}}
	if os.Getenv("RREF_LONG") != "" { // about 400,000 states: a minute on two cores

		cases = append(cases, struct{ members, work, rounds int }{3, 1, 2})
	}
	for _, c := range cases {
		r := explore.Explore(func() *barrierModel { return newBarrierModel(c.members, c.work, c.rounds, false) },
			explore.Options{Workers: -1, MaxStates: 3_000_000})
		if !r.Passed() || r.Truncated != "" {
			t.Fatalf("%+v: %v %s\n%s", c, r.Violation, r.Truncated, strings.Join(r.Trace, "\n"))
		}
		if r.States < 1000 {
			t.Errorf("%+v: only %d states", c, r.States)
		}
		t.Logf("%+v: %d states, %d transitions", c, r.States, r.Transitions)
	}
}

// allIdle is the blind barrier's test: every live member's latest report
// says idle, whatever its counts.
func (v barrierView) allIdle(self int) bool {
	if !v.self.idle {
		return false
	}
	for i, r := range v.reports {
		if i != self && !v.dead[i] && (r == nil || !r.idle) {
			return false
		}
	}
	return true
}

// TestBlindBarrierIsCaught: a barrier that trusts the idle flags and not
// the frame counts closes with work in flight, and the search shows how.
func TestBlindBarrierIsCaught(t *testing.T) {
	r := explore.Explore(func() *barrierModel { return newBarrierModel(2, 1, 3, true) }, explore.Options{})
	if r.Passed() || r.Violation.Invariant != groupwire.InvariantTermination && r.Violation.Invariant != groupwire.InvariantNoLostFrame {
		t.Fatalf("the hasty barrier passed: %v", r.Violation)
	}
	t.Logf("%v\n%s", r.Violation, strings.Join(r.Trace, "\n"))
}
