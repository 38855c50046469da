package worker

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"

	groupwire "github.com/rrefkit/rref/generated/group"
	"github.com/rrefkit/rref/runtime/core"
)

// Views: the group's membership as a numbered history (spec/group.rspec).
// A view lists each member's incarnation (its name, worker id and address);
// one member, the sequencer (the live member of the view with the lowest
// id), makes every new view and sends it to all, and each member applies
// views in increasing number. Ids are given out in order by the sequencer
// and never reused, so an id names one incarnation for good: the core's
// dead set, which refuses a fenced worker's messages, refuses an old
// incarnation's whatever its name. This file holds the decisions, pure so
// that the model test (view_model_test.go) explores the same code the
// workers run.

// maxWorkerID is the last id a view can give out: ids are the wire's u32,
// never reused, so a group that has admitted this many incarnations admits
// no more (RefusalReasonIDsExhausted) rather than wrap onto a fenced one.
const maxWorkerID = core.WorkerID(math.MaxUint32)

// viewMember is one incarnation in a view.
type viewMember struct {
	id   core.WorkerID
	name string
	addr string
}

// groupView is one view: its number, the next id to give out, and its
// members in id order.
type groupView struct {
	number  uint64
	nextID  core.WorkerID
	members []viewMember
}

// firstView is the view a group starts with: members 1..n in the order of
// Start's list, number 1.
func firstView(names, addrs []string) groupView {
	v := groupView{number: 1, nextID: core.WorkerID(len(names) + 1)}
	for i, n := range names {
		v.members = append(v.members, viewMember{id: core.WorkerID(i + 1), name: n, addr: addrs[i]})
	}
	return v
}

// has reports whether incarnation id is in the view.
func (v groupView) has(id core.WorkerID) bool {
	_, ok := v.member(id)
	return ok
}

// member is incarnation id's entry.
func (v groupView) member(id core.WorkerID) (viewMember, bool) {
	i, ok := slices.BinarySearchFunc(v.members, id, func(m viewMember, id core.WorkerID) int { return cmp.Compare(m.id, id) })
	if !ok {
		return viewMember{}, false
	}
	return v.members[i], true
}

// byName is the incarnation of name in the view.
func (v groupView) byName(name string) (viewMember, bool) {
	for _, m := range v.members {
		if m.name == name {
			return m, true
		}
	}
	return viewMember{}, false
}

// sequencer is the member that makes the next view, as a member whose dead
// set is dead sees it: the live member with the lowest id (0: none).
// Members agree on it once they agree on who is dead, which the group's
// fence gossip brings about; until then, a member sends its proposals to
// the one it sees, which keeps them until it is the sequencer itself.
func (v groupView) sequencer(dead func(core.WorkerID) bool) core.WorkerID {
	for _, m := range v.members {
		if !dead(m.id) {
			return m.id
		}
	}
	return 0
}

// equal reports whether two views are the same view.
func (v groupView) equal(o groupView) bool {
	return v.number == o.number && v.nextID == o.nextID && slices.Equal(v.members, o.members)
}

// String is the view as logs and errors show it: "#3 [a=1 b=2 d=4]".
func (v groupView) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "#%d [", v.number)
	for i, m := range v.members {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%s=%d", quoteIfNeeded(m.name), m.id)
	}
	b.WriteByte(']')
	return b.String()
}

// proposal is a view change asked of the sequencer.
type proposal struct {
	kind   groupwire.ChangeKind
	name   string        // join
	addr   string        // join
	member core.WorkerID // leave, remove
}

func (p proposal) String() string {
	switch p.kind {
	case groupwire.ChangeKindJoin:
		return "join of " + p.name
	case groupwire.ChangeKindLeave:
		return fmt.Sprintf("leave of #%d", p.member)
	default:
		return fmt.Sprintf("removal of #%d", p.member)
	}
}

// decide is the sequencer's: the view after v that p makes. changed is
// false when p changes nothing (a leave or removal of a member already
// gone: proposals are resent to a new sequencer, and must be idempotent);
// refuse is nonzero for a join it does not make, with why. A join of a
// name held by a live incarnation is refused (name_taken): the group may
// not yet have found a crashed member dead, and the newcomer asks again;
// a join while the sequencer is in its shutdown barrier is refused too.
func decide(v groupView, p proposal, shuttingDown bool) (next groupView, changed bool, refuse groupwire.RefusalReason, detail string) {
	switch p.kind {
	case groupwire.ChangeKindJoin:
		if m, ok := v.byName(p.name); ok {
			return v, false, groupwire.RefusalReasonNameTaken, fmt.Sprintf("worker: %s is a member of the group (worker #%d, at %s); a restarted member is admitted once the group has found its old self dead", p.name, m.id, m.addr)
		}
		if shuttingDown {
			return v, false, groupwire.RefusalReasonShuttingDown, "worker: the group is shutting down"
		}
		if v.nextID == 0 { // the last id went out: see maxWorkerID
			return v, false, groupwire.RefusalReasonIDsExhausted, fmt.Sprintf("worker: the group has given out all %d worker ids", uint64(maxWorkerID))
		}
		next = v.clone()
		next.number++
		next.members = append(next.members, viewMember{id: v.nextID, name: p.name, addr: p.addr})
		if v.nextID == maxWorkerID {
			next.nextID = 0 // none left: 0 is no worker's id
		} else {
			next.nextID = v.nextID + 1
		}
		return next, true, 0, ""
	default:
		if !v.has(p.member) {
			return v, false, 0, ""
		}
		next = v.clone()
		next.number++
		next.members = slices.DeleteFunc(next.members, func(m viewMember) bool { return m.id == p.member })
		return next, true, 0, ""
	}
}

func (v groupView) clone() groupView {
	v.members = slices.Clone(v.members)
	return v
}

// viewAction is what a member does with a view that arrives.
type viewAction uint8

const (
	viewStale    viewAction = iota + 1 // no newer than the one it holds: ignored
	viewApply                          // newer, with this member in it
	viewExcluded                       // newer, without this member: it left, or was removed
)

// classify says what member self, holding cur, does with view in. A newer
// view may skip numbers: a member whose sequencer died while sending a
// view may never get that one, and takes the next whole (views are whole
// memberships, not changes).
func classify(cur, in groupView, self core.WorkerID) viewAction {
	switch {
	case in.number <= cur.number:
		return viewStale
	case in.has(self):
		return viewApply
	default:
		return viewExcluded
	}
}

// changes lists the incarnations that joined and those gone from old to
// new, in id order.
func changes(old, new groupView) (joined, gone []viewMember) {
	for _, m := range new.members {
		if !old.has(m.id) {
			joined = append(joined, m)
		}
	}
	for _, m := range old.members {
		if !new.has(m.id) {
			gone = append(gone, m)
		}
	}
	return joined, gone
}

// wire is the view as the group protocol carries it.
func (v groupView) wire() groupwire.Membership {
	m := groupwire.Membership{Number: v.number, NextID: uint32(v.nextID), Members: make([]groupwire.ViewMember, len(v.members))}
	for i, x := range v.members {
		m.Members[i] = groupwire.ViewMember{ID: uint32(x.id), Name: x.name, Addr: x.addr}
	}
	return m
}

// viewOf checks a view from the wire: a number, members in increasing id
// order, each id given out already (below next_id, unless none is left),
// and names non-empty and unique.
func viewOf(m *groupwire.Membership) (groupView, error) {
	v := groupView{number: m.Number, nextID: core.WorkerID(m.NextID)}
	if v.number == 0 {
		return groupView{}, fmt.Errorf("worker: a view numbered 0")
	}
	seen := make(map[string]bool, len(m.Members))
	for i, x := range m.Members {
		id := core.WorkerID(x.ID)
		switch {
		case id == 0:
			return groupView{}, fmt.Errorf("worker: view #%d: member %d has id 0", v.number, i)
		case i > 0 && id <= v.members[i-1].id:
			return groupView{}, fmt.Errorf("worker: view #%d: member ids out of order (#%d after #%d)", v.number, id, v.members[i-1].id)
		case v.nextID != 0 && id >= v.nextID:
			return groupView{}, fmt.Errorf("worker: view #%d: member #%d not below the next id #%d", v.number, id, v.nextID)
		case x.Name == "" || seen[x.Name]:
			return groupView{}, fmt.Errorf("worker: view #%d: member #%d's name %q is empty or not unique", v.number, id, x.Name)
		}
		seen[x.Name] = true
		v.members = append(v.members, viewMember{id: id, name: x.Name, addr: x.Addr})
	}
	return v, nil
}

// syncDone reports whether a new sequencer self holding view v has a view
// report from every member of v it does not take for dead: it then holds
// every view its predecessor may have sent.
func syncDone(v groupView, self core.WorkerID, dead func(core.WorkerID) bool, reported func(core.WorkerID) bool) bool {
	for _, m := range v.members {
		if m.id != self && !dead(m.id) && !reported(m.id) {
			return false
		}
	}
	return true
}
