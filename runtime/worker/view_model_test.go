package worker

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/rrefkit/rref/explore"
	groupwire "github.com/rrefkit/rref/generated/group"
	"github.com/rrefkit/rref/runtime/core"
)

// The group protocol of views (join, leave, removal of the dead, a new
// incarnation under an old name, a sequencer taking over from a dead one)
// is a distributed protocol of its own, explored here as the RRef protocol
// and the barrier are: processes run the workers' own decisions (view.go:
// decide, classify, sequencer, syncDone; barrier.go: settled, same, fresher)
// over FIFO links in every interleaving, and a monitor checks the group
// protocol's invariants (spec/group.rspec) on every step:
//   - ViewAgreement: two members not fenced that applied a view of one
//     number applied the same view; each applies views in increasing number.
//   - OneIncarnation: a member never takes a frame from an incarnation the
//     group fenced, that left, or that a newer incarnation of its name
//     replaced in its view.
//   - UniqueIDs: no id is given to two incarnations.
//   - Termination, NoLostFrame: the shutdown barrier's, with views changing
//     while it runs.
// and at the end of every run: the live members hold one view, every
// Leave completed, and every newcomer whose seed lived was answered.

// vmKind is the kind of a frame on a model link.
type vmKind uint8

const (
	vmWork        vmKind = iota + 1 // a protocol frame: makes its receiver busy
	vmReport                        // a barrier report
	vmView                          // the sequencer's view
	vmViewReport                    // a member's view, to a new sequencer
	vmPropose                       // a change, to the sequencer
	vmFence                         // a member fenced
	vmJoinReq                       // newcomer to seed
	vmWelcome                       // seed to newcomer
	vmRefused                       // seed to newcomer
	vmJoinRefused                   // sequencer to seed
)

type vmFrame struct {
	kind   vmKind
	report *barrierReport
	view   groupView // never written once sent: shared by copies
	prop   proposal
	id     core.WorkerID // vmFence: the member fenced; vmWelcome: the newcomer's id
	name   string        // vmJoinReq, vmJoinRefused: the newcomer
}

// vmMaxIDs bounds the ids a scenario gives out: the barrier's counts are
// indexed by id-1 up to it.
const vmMaxIDs = 6

type vmQueued struct {
	p    proposal
	from int // the proc that proposed
}

type vmPending struct {
	name   string
	joiner int           // the newcomer's proc
	since  core.WorkerID // the seed's next id when asked: an incarnation of the name from it on is the newcomer
}

type vmReported struct {
	id   core.WorkerID
	view groupView
}

// vmProc is one process: one incarnation of a name.
type vmProc struct {
	name     string
	id       core.WorkerID // 0 until admitted
	alive    bool          // false once crashed: it takes no step again
	asking   bool          // a newcomer: its request is out, unanswered
	admitted bool
	refused  int // a newcomer: refusals heard
	state    groupwire.MemberState
	byBar    bool // closed by the barrier
	view     groupView
	history  []groupView // every view applied, in order
	dead     []core.WorkerID
	seq      core.WorkerID // the sequencer it sees, and told
	synced   bool          // as sequencer: it holds every view its predecessor sent
	reports  []vmReported  // as (future) sequencer: members' views
	queue    []vmQueued    // proposals held until it is the synced sequencer
	outs     []proposal    // its own proposals, until a view shows them done
	pending  []vmPending   // as seed
	// barrier
	busy     bool
	budget   int
	rounds   int
	round    uint64
	sent     []uint64
	taken    []uint64
	bars     []*barrierReport
	last     barrierView
	haveLast bool
}

func (p *vmProc) isDead(id core.WorkerID) bool {
	_, ok := slices.BinarySearch(p.dead, id)
	return ok
}

func (p *vmProc) addDead(id core.WorkerID) {
	if i, ok := slices.BinarySearch(p.dead, id); !ok {
		p.dead = slices.Insert(slices.Clip(p.dead), i, id)
	}
}

// vmPlan is a scenario: who starts, who may join (through which seed, and
// after whose end), crash, be fenced while alive, leave, shut down.
type vmPlan struct {
	name     string
	initial  []string
	joiners  []vmJoiner
	crash    []string // procs (by name, first incarnation) that may crash
	mistaken []string // procs a peer may take for dead while they live
	leave    []string
	shutdown bool
	work     map[string]int // work frames a proc may send; a member with some starts busy
	rounds   int
	// long: explored with RREF_LONG set only, up to viewMaxStates, past
	// which the search stops without a proof (it logs so): the barrier's
	// rounds and reports with a join or a crash make millions of states.
	long bool
}

type vmJoiner struct {
	name    string
	seed    string // the initial member it dials
	after   bool   // a new incarnation: it starts once its name's first incarnation crashed or closed
	retries int
}

type viewModel struct {
	plan  *vmPlan
	procs []vmProc
	links [][][]vmFrame // [from][to] proc
	// mutants, the seeded bugs:
	staleAccepted bool  // a member takes frames from an incarnation it fenced
	noSync        bool  // a new sequencer proposes without the views of the live members
	joinInBarrier bool  // the sequencer admits newcomers in its shutdown barrier
	given         []int // proc of each id given out, index id-1 (-1: none)
	violation     *explore.Violation
}

func newViewModel(plan *vmPlan) *viewModel {
	m := &viewModel{plan: plan, given: slices.Repeat([]int{-1}, vmMaxIDs)}
	addrs := make([]string, len(plan.initial))
	for i, n := range plan.initial {
		addrs[i] = strings.ToLower(n) + ":1"
	}
	v := firstView(plan.initial, addrs)
	for i, n := range plan.initial {
		p := vmProc{name: n, id: core.WorkerID(i + 1), alive: true, admitted: true, state: groupwire.MemberStart, view: v,
			history: []groupView{v}, synced: true, budget: plan.work[n], rounds: plan.rounds}
		p.seq = v.sequencer(p.isDead)
		m.given[i] = i
		m.procs = append(m.procs, p)
	}
	for _, j := range plan.joiners {
		m.procs = append(m.procs, vmProc{name: j.name, alive: true, state: groupwire.MemberStart, budget: plan.work[j.name], rounds: plan.rounds})
	}
	for i := range m.procs {
		p := &m.procs[i]
		p.sent, p.taken, p.bars = make([]uint64, vmMaxIDs), make([]uint64, vmMaxIDs), make([]*barrierReport, vmMaxIDs)
	}
	for i := range plan.initial {
		m.procs[i].busy = m.procs[i].budget > 0
	}
	n := len(m.procs)
	m.links = make([][][]vmFrame, n)
	for i := range m.links {
		m.links[i] = make([][]vmFrame, n)
	}
	return m
}

func (m *viewModel) procOf(name string, first bool) int {
	for i, p := range m.procs {
		if p.name == name {
			if first || i >= len(m.plan.initial) {
				return i
			}
		}
	}
	return -1
}

func (m *viewModel) procByID(id core.WorkerID) int {
	if id < 1 || int(id) > len(m.given) {
		return -1
	}
	return m.given[id-1]
}

func (m *viewModel) fail(inv, format string, args ...any) {
	if m.violation == nil {
		m.violation = &explore.Violation{Invariant: inv, Detail: fmt.Sprintf(format, args...)}
	}
}

func (m *viewModel) stepState(p *vmProc, e groupwire.MemberEvent) {
	next, _, err := groupwire.StepMember(p.state, e)
	if err != nil {
		m.fail("spec", "%s: %v", p.name, err)
		return
	}
	p.state = next
}

// Choices: kind<<10 | a<<5 | b, a and b procs.
const (
	vcJoin = iota + 1
	vcCrash
	vcDetect // a detects b dead (or takes it for dead)
	vcLeave
	vcShutdown
	vcRound
	vcFinish
	vcSend
	vcDeliver
)

func vc(kind, a, b int) int { return kind<<10 | a<<5 | b }

func (m *viewModel) live(i int) bool {
	p := &m.procs[i]
	return p.alive && p.admitted && p.state != groupwire.MemberClosed
}

func (m *viewModel) Choices() []int {
	var out []int
	plan := m.plan
	for i := range m.procs {
		p := &m.procs[i]
		if !p.alive {
			continue
		}
		if i >= len(plan.initial) && !p.admitted && !p.asking {
			j := plan.joiners[i-len(plan.initial)]
			if p.refused <= j.retries && (!j.after || m.predecessorGone(i)) {
				out = append(out, vc(vcJoin, i, 0))
			}
		}
		if !m.live(i) {
			continue
		}
		if slices.Contains(plan.crash, p.name) && i < len(plan.initial) {
			out = append(out, vc(vcCrash, i, 0))
		}
		for j := range m.procs {
			q := &m.procs[j]
			if j == i || q.id == 0 || !p.view.has(q.id) || p.isDead(q.id) {
				continue
			}
			// A crash is found; a member that lives may be taken for dead
			// by mistake (paused past DeadAfter, say).
			if !q.alive || q.state != groupwire.MemberClosed && slices.Contains(plan.mistaken, q.name) && j < len(plan.initial) {
				out = append(out, vc(vcDetect, i, j))
			}
		}
		if p.state == groupwire.MemberRunning && slices.Contains(plan.leave, p.name) && !p.busy {
			out = append(out, vc(vcLeave, i, 0))
		}
		if p.state == groupwire.MemberRunning && plan.shutdown {
			out = append(out, vc(vcShutdown, i, 0))
		}
		if p.state == groupwire.MemberLeaving && p.rounds > 0 {
			out = append(out, vc(vcRound, i, 0))
		}
		if p.busy {
			out = append(out, vc(vcFinish, i, 0))
			if p.budget > 0 && p.state != groupwire.MemberDeparting {
				for j := range m.procs {
					if j != i && m.procs[j].id != 0 && p.view.has(m.procs[j].id) && !p.isDead(m.procs[j].id) {
						out = append(out, vc(vcSend, i, j))
					}
				}
			}
		}
	}
	for a := range m.procs {
		for b := range m.procs {
			if len(m.links[a][b]) > 0 && m.linkUp(a, b) {
				out = append(out, vc(vcDeliver, a, b))
			}
		}
	}
	return out
}

// linkUp says whether frames from a can reach b: a newcomer's links are
// made by the members that apply the view admitting it, so a member takes
// frames only from incarnations it knows of (below its view's next id),
// but for the seed link a newcomer dialed.
func (m *viewModel) linkUp(a, b int) bool {
	pa, pb := &m.procs[a], &m.procs[b]
	if head := m.links[a][b][0]; head.kind == vmJoinReq || head.kind == vmWelcome || head.kind == vmRefused {
		return true
	}
	return pa.id != 0 && pb.id != 0 && pa.id < pb.view.nextID && pb.id < pa.view.nextID
}

func (m *viewModel) seedOf(i int) int {
	return m.procOf(m.plan.joiners[i-len(m.plan.initial)].seed, true)
}

func (m *viewModel) predecessorGone(i int) bool {
	first := m.procOf(m.procs[i].name, true)
	return first != i && (!m.procs[first].alive || m.procs[first].state == groupwire.MemberClosed)
}

func (m *viewModel) send(from, to int, f vmFrame) {
	m.links[from][to] = append(slices.Clip(m.links[from][to]), f)
}

func (m *viewModel) Step(c int) {
	kind, a, b := c>>10, (c>>5)&31, c&31
	p := &m.procs[a]
	switch kind {
	case vcJoin:
		p.asking = true
		m.send(a, m.seedOf(a), vmFrame{kind: vmJoinReq, name: p.name})
	case vcCrash:
		p.alive = false
	case vcDetect:
		m.fence(a, m.procs[b].id)
	case vcLeave:
		m.stepState(p, groupwire.MemberOnLeave)
		m.propose(a, proposal{kind: groupwire.ChangeKindLeave, member: p.id})
	case vcShutdown:
		m.stepState(p, groupwire.MemberOnShutdown)
	case vcRound:
		m.barrierRound(a)
	case vcFinish:
		p.busy = false
	case vcSend:
		if q := &m.procs[b]; q.byBar {
			m.fail(groupwire.InvariantNoLostFrame, "%s sent work to %s, which the barrier closed", p.name, q.name)
		}
		p.busy = false
		p.budget--
		p.sent[m.procs[b].id-1]++
		m.send(a, b, vmFrame{kind: vmWork})
	case vcDeliver:
		f := m.links[a][b][0]
		m.links[a][b] = m.links[a][b][1:]
		m.deliver(a, b, f)
	}
}

// fence is member i fencing incarnation id: told everyone, proposed for
// removal (fence.go, then the view).
func (m *viewModel) fence(i int, id core.WorkerID) {
	p := &m.procs[i]
	if p.isDead(id) || id == p.id {
		return
	}
	p.addDead(id)
	for _, x := range p.view.members {
		if x.id != p.id {
			m.send(i, m.procByID(x.id), vmFrame{kind: vmFence, id: id})
		}
	}
	m.propose(i, proposal{kind: groupwire.ChangeKindRemove, member: id})
	m.seqChanged(i)
}

// propose sends p to the sequencer member i sees, and keeps it until a
// view shows it done.
func (m *viewModel) propose(i int, pr proposal) {
	p := &m.procs[i]
	if !slices.Contains(p.outs, pr) {
		p.outs = append(slices.Clip(p.outs), pr)
	}
	m.toSequencer(i, pr)
}

func (m *viewModel) toSequencer(i int, pr proposal) {
	p := &m.procs[i]
	if p.seq == p.id {
		p.queue = append(slices.Clip(p.queue), vmQueued{pr, i})
		m.serve(i)
		return
	}
	if s := m.procByID(p.seq); s >= 0 {
		m.send(i, s, vmFrame{kind: vmPropose, prop: pr})
	}
}

// seqChanged acts when member i may see a new sequencer: it reports its
// view to it and resends its proposals; a member that is now the
// sequencer waits for the others' views first.
func (m *viewModel) seqChanged(i int) {
	p := &m.procs[i]
	s := p.view.sequencer(p.isDead)
	if s == p.seq || s == 0 {
		return
	}
	p.seq = s
	if s == p.id {
		// Its own proposals went to its predecessor: it holds them now.
		for _, pr := range p.outs {
			p.queue = append(slices.Clip(p.queue), vmQueued{pr, i})
		}
		// Its own view goes out at once: a member its predecessor left
		// behind catches up, and a seed that missed the view admitting
		// its newcomer welcomes it, so that the newcomer can report too.
		m.broadcast(i, p.view, p.view)
		p.synced = m.noSync
		m.serve(i)
		return
	}
	to := m.procByID(s)
	m.send(i, to, vmFrame{kind: vmViewReport, view: p.view})
	for _, pr := range p.outs {
		m.send(i, to, vmFrame{kind: vmPropose, prop: pr})
	}
}

// serve is the sequencer's loop: once synced, it makes a view for each
// proposal held.
func (m *viewModel) serve(i int) {
	p := &m.procs[i]
	if p.seq != p.id || p.state == groupwire.MemberClosed {
		return
	}
	if !p.synced {
		reported := func(id core.WorkerID) bool {
			return slices.ContainsFunc(p.reports, func(r vmReported) bool { return r.id == id })
		}
		if !syncDone(p.view, p.id, p.isDead, reported) {
			return
		}
		p.synced = true
		newest := p.view
		for _, r := range p.reports {
			if r.view.number > newest.number && !p.isDead(r.id) {
				newest = r.view
			}
		}
		if newest.number > p.view.number {
			m.applyView(i, newest)
			if m.procs[i].state == groupwire.MemberClosed {
				return
			}
		}
		// Those behind take it; the others ignore it.
		m.broadcast(i, p.view, p.view)
	}
	for len(p.queue) > 0 && p.seq == p.id && p.state != groupwire.MemberClosed {
		q := p.queue[0]
		p.queue = p.queue[1:]
		next, changed, refuse, _ := decide(p.view, q.p, p.state == groupwire.MemberLeaving && !m.joinInBarrier)
		if refuse != 0 {
			if q.from == i {
				m.deliver(i, i, vmFrame{kind: vmJoinRefused, name: q.p.name})
			} else {
				m.send(i, q.from, vmFrame{kind: vmJoinRefused, name: q.p.name})
			}
			continue
		}
		if !changed {
			continue
		}
		if q.p.kind == groupwire.ChangeKindJoin {
			id, to := next.nextID-1, m.procOf(q.p.name, false)
			if m.given[id-1] >= 0 && m.given[id-1] != to {
				m.fail(groupwire.InvariantUniqueIDs, "id #%d given to %s and to %s", id, m.procs[m.given[id-1]].name, m.procs[to].name)
			}
			m.given[id-1] = to
		}
		m.broadcast(i, p.view, next)
		m.applyView(i, next)
	}
}

// broadcast sends view next to the members of it and of old (those it
// removes learn that they are out), but a newcomer, whose seed's Welcome
// carries the view.
func (m *viewModel) broadcast(i int, old, next groupView) {
	p := &m.procs[i]
	for _, x := range old.members {
		if x.id != p.id && !next.has(x.id) {
			m.send(i, m.procByID(x.id), vmFrame{kind: vmView, view: next})
		}
	}
	for _, x := range next.members {
		if x.id != p.id && (old.has(x.id) || x.id < old.nextID) {
			m.send(i, m.procByID(x.id), vmFrame{kind: vmView, view: next})
		}
	}
}

// applyView is member i taking view v (classify decides).
func (m *viewModel) applyView(i int, v groupView) {
	p := &m.procs[i]
	switch classify(p.view, v, p.id) {
	case viewStale:
		return
	case viewExcluded:
		if p.state == groupwire.MemberDeparting {
			m.stepState(p, groupwire.MemberOnExcluded)
		} else {
			m.stepState(p, groupwire.MemberOnFenced)
		}
		return
	}
	if last := p.history[len(p.history)-1]; v.number <= last.number {
		m.fail(groupwire.InvariantViewAgreement, "%s applied view #%d after #%d", p.name, v.number, last.number)
	}
	m.stepState(p, groupwire.MemberOnViewChange)
	_, gone := changes(p.view, v)
	for _, x := range gone {
		p.addDead(x.id)
	}
	// Incarnations that joined and went in views this member skipped.
	for id := p.view.nextID; id < v.nextID; id++ {
		if !v.has(id) {
			p.addDead(id)
		}
	}
	p.view = v
	p.history = append(slices.Clip(p.history), v)
	m.agree(i)
	// Proposals a view shows done are dropped; newcomers it admits are
	// welcomed by their seed.
	p.outs = slices.DeleteFunc(slices.Clone(p.outs), func(pr proposal) bool {
		if pr.kind == groupwire.ChangeKindJoin {
			x, ok := v.byName(pr.name)
			return ok && slices.ContainsFunc(p.pending, func(pd vmPending) bool { return pd.name == pr.name && x.id >= pd.since })
		}
		return !v.has(pr.member)
	})
	kept := p.pending[:0:0]
	for _, pd := range p.pending {
		if x, ok := v.byName(pd.name); ok && x.id >= pd.since {
			m.send(i, pd.joiner, vmFrame{kind: vmWelcome, id: x.id, view: v})
			continue
		}
		kept = append(kept, pd)
	}
	p.pending = kept
	m.seqChanged(i)
	m.serve(i)
}

// agree checks ViewAgreement between member i and every other member that
// is alive and that no live member has fenced.
func (m *viewModel) agree(i int) {
	if m.fenced(i) {
		return
	}
	mine := m.procs[i].history
	for j := range m.procs {
		q := &m.procs[j]
		if j == i || !q.admitted || !q.alive || m.fenced(j) {
			continue
		}
		for _, v := range q.history {
			for _, w := range mine {
				if v.number == w.number && !v.equal(w) {
					m.fail(groupwire.InvariantViewAgreement, "%s applied view %v, %s view %v", m.procs[i].name, w, q.name, v)
					return
				}
			}
		}
	}
}

// fenced says whether some live member fenced proc j.
func (m *viewModel) fenced(j int) bool {
	id := m.procs[j].id
	for k := range m.procs {
		if m.procs[k].alive && m.procs[k].isDead(id) {
			return true
		}
	}
	return false
}

func (m *viewModel) deliver(a, b int, f vmFrame) {
	from, to := &m.procs[a], &m.procs[b]
	if !to.alive {
		return
	}
	if to.state == groupwire.MemberClosed {
		if f.kind == vmWork && to.byBar {
			m.fail(groupwire.InvariantNoLostFrame, "work from %s reached %s, which the barrier closed", from.name, to.name)
		}
		return
	}
	switch f.kind {
	case vmWelcome:
		to.asking = false
		m.welcome(b, f)
		return
	case vmRefused:
		to.asking = false
		to.refused++
		return
	case vmJoinReq:
		if to.state != groupwire.MemberRunning {
			m.send(b, a, vmFrame{kind: vmRefused})
			return
		}
		to.pending = append(slices.Clip(to.pending), vmPending{name: f.name, joiner: a, since: to.view.nextID})
		m.propose(b, proposal{kind: groupwire.ChangeKindJoin, name: f.name, addr: strings.ToLower(f.name) + ":2"})
		return
	}
	// The frame is from a member: taken only from an incarnation not fenced.
	if !m.staleAccepted && to.isDead(from.id) {
		return
	}
	if x, ok := to.view.byName(from.name); to.isDead(from.id) || ok && x.id != from.id {
		m.fail(groupwire.InvariantOneIncarnation, "%s took a frame from %s #%d, which it holds fenced or replaced (its view: %v)", to.name, from.name, from.id, to.view)
		return
	}
	switch f.kind {
	case vmWork:
		to.taken[from.id-1]++
		if to.state != groupwire.MemberDeparting {
			to.busy = true
		}
	case vmReport:
		if old := to.bars[from.id-1]; old == nil || f.report.round > old.round {
			to.bars[from.id-1] = f.report
		}
	case vmView:
		m.applyView(b, f.view)
	case vmViewReport:
		to.reports = append(slices.DeleteFunc(slices.Clone(to.reports), func(r vmReported) bool { return r.id == from.id }), vmReported{from.id, f.view})
		m.serve(b)
	case vmPropose:
		to.queue = append(slices.Clip(to.queue), vmQueued{f.prop, a})
		m.serve(b)
	case vmFence:
		if f.id == to.id {
			m.stepState(to, groupwire.MemberOnFenced)
			return
		}
		m.fence(b, f.id)
	case vmJoinRefused:
		i := slices.IndexFunc(to.pending, func(pd vmPending) bool { return pd.name == f.name })
		if i < 0 {
			return
		}
		pd := to.pending[i]
		if x, ok := to.view.byName(pd.name); ok && x.id >= pd.since {
			return // a resend refused: the first made it, and the view welcomes it
		}
		to.pending = slices.Delete(slices.Clone(to.pending), i, i+1)
		to.outs = slices.DeleteFunc(slices.Clone(to.outs), func(pr proposal) bool { return pr.kind == groupwire.ChangeKindJoin && pr.name == pd.name })
		m.send(b, pd.joiner, vmFrame{kind: vmRefused})
	}
}

func (m *viewModel) welcome(j int, f vmFrame) {
	p := &m.procs[j]
	if p.admitted {
		m.fail(groupwire.InvariantUniqueIDs, "%s welcomed twice", p.name)
		return
	}
	if m.given[f.id-1] != j {
		m.fail(groupwire.InvariantUniqueIDs, "%s welcomed as #%d, given to proc %d", p.name, f.id, m.given[f.id-1])
	}
	p.id, p.admitted, p.view, p.history = f.id, true, f.view, []groupView{f.view}
	for id := core.WorkerID(1); id < f.view.nextID; id++ {
		if !f.view.has(id) {
			p.addDead(id)
		}
	}
	p.seq = f.view.sequencer(p.isDead)
	p.synced = true
	p.busy = p.budget > 0
	m.agree(j)
}

// barrierRound is Shutdown's loop body for member i, on the real decisions.
func (m *viewModel) barrierRound(i int) {
	p := &m.procs[i]
	p.rounds--
	p.round++
	self := barrierReport{round: p.round, idle: !p.busy, view: p.view.number, counts: counts{sent: slices.Clone(p.sent), taken: slices.Clone(p.taken)}}
	v := barrierView{self: self, reports: make([]*barrierReport, vmMaxIDs), dead: make([]bool, vmMaxIDs)}
	names := make([]string, vmMaxIDs)
	for k := range vmMaxIDs {
		id := core.WorkerID(k + 1)
		names[k] = fmt.Sprintf("#%d", id)
		v.dead[k] = id != p.id && (!p.view.has(id) || p.isDead(id))
		if id != p.id && !v.dead[k] {
			r := self
			m.send(i, m.procByID(id), vmFrame{kind: vmReport, report: &r})
		}
		if r := p.bars[k]; r != nil {
			c := *r
			v.reports[k] = &c
		}
	}
	ok, _ := v.settled(p.id, names)
	if ok {
		m.stepState(p, groupwire.MemberOnSettled)
	}
	if ok && p.haveLast && v.same(p.last) && v.fresher(p.last, p.id) {
		m.stepState(p, groupwire.MemberOnConfirmed)
		p.byBar = true
		m.terminated(i)
		return
	}
	if ok && !(p.haveLast && v.same(p.last)) {
		p.last, p.haveLast = v, true
	} else if !ok {
		p.haveLast = false
	}
}

// terminated checks Termination as member i closes by the barrier.
func (m *viewModel) terminated(i int) {
	for j := range m.procs {
		if m.live(j) && m.procs[j].busy {
			m.fail(groupwire.InvariantTermination, "%s closed while %s was busy", m.procs[i].name, m.procs[j].name)
			return
		}
	}
	for a := range m.procs {
		for b := range m.procs {
			for _, f := range m.links[a][b] {
				if f.kind == vmWork && m.live(b) {
					m.fail(groupwire.InvariantTermination, "%s closed with work in flight from %s to %s", m.procs[i].name, m.procs[a].name, m.procs[b].name)
					return
				}
			}
		}
	}
}

func (m *viewModel) Violation() *explore.Violation { return m.violation }

// CheckEnd: with nothing left to do, the live members hold one view, every
// Leave completed, and every newcomer whose seed lived was answered.
func (m *viewModel) CheckEnd() {
	var first *vmProc
	for i := range m.procs {
		p := &m.procs[i]
		if !m.live(i) || m.fenced(i) {
			continue
		}
		if p.state == groupwire.MemberDeparting {
			m.fail("end", "%s's Leave never completed (view %v)", p.name, p.view)
			return
		}
		if first == nil {
			first = p
		} else if !first.view.equal(p.view) {
			m.fail(groupwire.InvariantViewAgreement, "the run ended with %s in view %v and %s in %v", first.name, first.view, p.name, p.view)
			return
		}
	}
	for i := len(m.plan.initial); i < len(m.procs); i++ {
		p := &m.procs[i]
		seed := &m.procs[m.seedOf(i)]
		// A seed in its barrier may be one whose rounds ran out (the
		// model's bound), not one that would never answer.
		if p.alive && p.asking && seed.alive && seed.state == groupwire.MemberRunning {
			m.fail("end", "%s asked %s to join and was never answered", p.name, seed.name)
			return
		}
	}
}

func (m *viewModel) Describe(c int) string {
	kind, a, b := c>>10, (c>>5)&31, c&31
	pa := &m.procs[a]
	switch kind {
	case vcJoin:
		return fmt.Sprintf("%s asks %s to join", pa.name, m.procs[m.seedOf(a)].name)
	case vcCrash:
		return fmt.Sprintf("%s #%d crashes", pa.name, pa.id)
	case vcDetect:
		return fmt.Sprintf("%s fences %s #%d", pa.name, m.procs[b].name, m.procs[b].id)
	case vcLeave:
		return pa.name + " leaves"
	case vcShutdown:
		return pa.name + " shuts down"
	case vcRound:
		return pa.name + " takes a barrier round"
	case vcFinish:
		return pa.name + " finishes its work"
	case vcSend:
		return fmt.Sprintf("%s sends work to %s", pa.name, m.procs[b].name)
	}
	f := m.links[a][b][0]
	what := map[vmKind]string{vmWork: "work", vmReport: "report", vmView: "view", vmViewReport: "view report", vmPropose: "proposal",
		vmFence: "fence", vmJoinReq: "join request", vmWelcome: "welcome", vmRefused: "refusal", vmJoinRefused: "join refused"}[f.kind]
	switch f.kind {
	case vmView, vmViewReport, vmWelcome:
		what += " " + f.view.String()
	case vmPropose:
		what += " " + f.prop.String()
	case vmFence:
		what += fmt.Sprintf(" #%d", f.id)
	}
	return fmt.Sprintf("deliver %s -> %s: %s", pa.name, m.procs[b].name, what)
}

func (m *viewModel) ChoiceKey(c int) string { return m.Describe(c) }

func (m *viewModel) Clone() *viewModel {
	n := *m
	n.procs = slices.Clone(m.procs)
	for i := range n.procs {
		p := &n.procs[i]
		p.sent, p.taken, p.bars = slices.Clone(p.sent), slices.Clone(p.taken), slices.Clone(p.bars)
	}
	n.given = slices.Clone(m.given)
	n.links = make([][][]vmFrame, len(m.links))
	for i := range m.links {
		n.links[i] = slices.Clone(m.links[i])
	}
	return &n
}

func appendView(b []byte, v groupView) []byte {
	b = appendU(appendU(b, v.number), uint64(v.nextID))
	for _, x := range v.members {
		b = append(appendU(b, uint64(x.id)), x.name...)
	}
	return append(b, ';')
}

// appendU appends x and a separator: AppendState runs on every state the
// search enters, and fmt would be most of the search's time.
func appendU(b []byte, x uint64) []byte { return append(strconv.AppendUint(b, x, 10), ',') }

func appendB(b []byte, x bool) []byte {
	if x {
		return append(b, 't')
	}
	return append(b, 'f')
}

func appendUs(b []byte, xs []uint64) []byte {
	for _, x := range xs {
		b = appendU(b, x)
	}
	return append(b, ';')
}

func appendProposal(b []byte, p proposal) []byte {
	return append(append(appendU(appendU(b, uint64(p.kind)), uint64(p.member)), p.name...), ';')
}

func (m *viewModel) AppendState(b []byte) []byte {
	rep := func(r *barrierReport) {
		if r == nil {
			b = append(b, '-')
			return
		}
		b = appendUs(appendUs(appendU(appendB(appendU(b, r.round), r.idle), r.view), r.sent), r.taken)
	}
	for _, p := range m.procs {
		b = appendU(b, uint64(p.id))
		b = appendB(appendB(appendB(appendB(appendB(appendB(b, p.alive), p.asking), p.admitted), p.byBar), p.synced), p.busy)
		b = appendU(appendU(appendU(appendU(appendU(appendU(b, uint64(p.refused)), uint64(p.state)), uint64(p.seq)), uint64(p.budget)), uint64(p.rounds)), p.round)
		for _, d := range p.dead {
			b = appendU(b, uint64(d))
		}
		b = append(b, '|')
		b = appendView(b, p.view)
		for _, h := range p.history {
			b = appendView(b, h)
		}
		b = append(b, 'r')
		for _, r := range p.reports {
			b = appendView(appendU(b, uint64(r.id)), r.view)
		}
		b = append(b, 'q')
		for _, q := range p.queue {
			b = appendU(appendProposal(b, q.p), uint64(q.from))
		}
		b = append(b, 'o')
		for _, o := range p.outs {
			b = appendProposal(b, o)
		}
		b = append(b, 'p')
		for _, pd := range p.pending {
			b = appendU(appendU(append(b, pd.name...), uint64(pd.joiner)), uint64(pd.since))
		}
		b = appendUs(appendUs(b, p.sent), p.taken)
		for _, r := range p.bars {
			rep(r)
		}
		if p.haveLast {
			rep(&p.last.self)
			for _, r := range p.last.reports {
				rep(r)
			}
			for _, d := range p.last.dead {
				b = appendB(b, d)
			}
		}
		b = append(b, '#')
	}
	for _, g := range m.given {
		b = appendU(b, uint64(g+1))
	}
	for i := range m.links {
		for j := range m.links[i] {
			for _, f := range m.links[i][j] {
				b = append(appendU(appendU(b, uint64(f.kind)), uint64(f.id)), f.name...)
				b = appendView(appendProposal(b, f.prop), f.view)
				if f.report != nil {
					rep(f.report)
				}
			}
			b = append(b, '/')
		}
	}
	return b
}

// viewPlans are the scenarios: each change during another change, and
// during the shutdown barrier.
func viewPlans() []*vmPlan {
	return []*vmPlan{
		{name: "join while a member crashes", initial: []string{"A", "B", "C"}, joiners: []vmJoiner{{name: "D", seed: "B"}}, crash: []string{"C"}},
		{name: "leave while a member joins", initial: []string{"A", "B", "C"}, joiners: []vmJoiner{{name: "D", seed: "C"}}, leave: []string{"B"}},
		{name: "the sequencer leaves while a member joins", initial: []string{"A", "B", "C"}, joiners: []vmJoiner{{name: "D", seed: "C"}}, leave: []string{"A"}},
		{name: "join while the sequencer crashes", initial: []string{"A", "B", "C"}, joiners: []vmJoiner{{name: "D", seed: "C"}}, crash: []string{"A"}},
		{name: "rejoin while the sequencer crashes", initial: []string{"A", "B", "C"}, joiners: []vmJoiner{{name: "C", seed: "B", after: true, retries: 1}}, crash: []string{"A", "C"}},
		{name: "fenced by mistake, rejoins", initial: []string{"A", "B"}, joiners: []vmJoiner{{name: "B", seed: "A", after: true, retries: 1}}, mistaken: []string{"B"}, work: map[string]int{"B": 1}},
		{name: "join during the barrier", initial: []string{"A", "B"}, joiners: []vmJoiner{{name: "C", seed: "A"}}, shutdown: true, work: map[string]int{"A": 1, "C": 1}, rounds: 2, long: true},
		{name: "leave during the barrier", initial: []string{"A", "B", "C"}, leave: []string{"B"}, shutdown: true, rounds: 2},
		{name: "crash during the barrier", initial: []string{"A", "B", "C"}, crash: []string{"C"}, shutdown: true, rounds: 2, long: true},
		{name: "join through a running seed during the barrier", initial: []string{"A", "B", "C"}, joiners: []vmJoiner{{name: "D", seed: "B"}}, shutdown: true, work: map[string]int{"D": 1}, rounds: 2, long: true},
	}
}

// TestViewProtocol explores every interleaving of each scenario.
func TestViewProtocol(t *testing.T) {
	for _, plan := range viewPlans() {
		t.Run(plan.name, func(t *testing.T) {
			if plan.long && os.Getenv("RREF_LONG") == "" {
				t.Skip("set RREF_LONG to explore it (minutes on two cores)")
			}
			r := explore.Explore(func() *viewModel { return newViewModel(plan) }, explore.Options{Workers: -1, MaxStates: viewMaxStates})
			if !r.Passed() || r.Truncated != "" && !plan.long {
				t.Fatalf("%v %s\n%s\nreplay: %s", r.Violation, r.Truncated, strings.Join(r.Trace, "\n"), r.ScheduleString())
			}
			if r.States < 50 {
				t.Errorf("only %d states", r.States)
			}
			t.Logf("%d states, %d transitions %s", r.States, r.Transitions, r.Truncated)
		})
	}
}

// TestViewProtocolSeededBugs: each bug seeded into the decisions is caught,
// with a schedule that replays it.
func TestViewProtocolSeededBugs(t *testing.T) {
	plans := viewPlans()
	cases := []struct {
		name  string
		plan  *vmPlan
		seed  func(*viewModel)
		want  []string
		walks bool // the plan is too large to search whole: random walks find it
	}{
		{"an old incarnation's frame taken", plans[5], func(m *viewModel) { m.staleAccepted = true }, []string{groupwire.InvariantOneIncarnation}, false},
		{"a new sequencer without its peers' views", plans[3], func(m *viewModel) { m.noSync = true }, []string{groupwire.InvariantViewAgreement, groupwire.InvariantUniqueIDs}, false},
		// A member that settled on reports all taken before the join closes,
		// though the reports' view numbers differ only after: the
		// sequencer's refusal is what keeps the barrier's picture whole.
		{"a join admitted in the barrier", plans[len(plans)-1], func(m *viewModel) { m.joinInBarrier = true }, []string{groupwire.InvariantTermination, groupwire.InvariantNoLostFrame}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			start := func() *viewModel { m := newViewModel(c.plan); c.seed(m); return m }
			opt := explore.Options{Workers: -1, MaxStates: viewMaxStates}
			if c.walks {
				opt = explore.Options{Mode: explore.Random, Walks: 200_000, Seed: 1}
			}
			r := explore.Explore(start, opt)
			if r.Passed() {
				t.Fatalf("the bug passed (%d states)", r.States)
			}
			if !slices.Contains(c.want, r.Violation.Invariant) {
				t.Fatalf("caught as %v, want %s\n%s", r.Violation, c.want, strings.Join(r.Trace, "\n"))
			}
			again := explore.Replay(start, r.Schedule)
			if again.Violation == nil || again.Violation.Invariant != r.Violation.Invariant {
				t.Fatalf("the schedule %s does not replay it: %v", r.ScheduleString(), again.Violation)
			}
			t.Logf("%v\n%s\nreplay: %s", r.Violation, strings.Join(r.Trace, "\n"), r.ScheduleString())
		})
	}
}

// viewMaxStates bounds each search: the scenarios stay well below it.
var viewMaxStates = 3_000_000
