package worker

import (
	"strings"
	"testing"

	groupwire "github.com/rrefkit/rref/generated/group"
	"github.com/rrefkit/rref/runtime/core"
)

func TestDecideJoinLeaveRemove(t *testing.T) {
	v := firstView([]string{"a", "b"}, []string{"h:1", "h:2"})
	j, changed, refuse, _ := decide(v, proposal{kind: groupwire.ChangeKindJoin, name: "c", addr: "h:3"}, false)
	if !changed || refuse != 0 || j.number != 2 || j.nextID != 4 || !j.has(3) {
		t.Fatalf("join: %v changed=%v refuse=%v", j, changed, refuse)
	}
	if _, changed, refuse, _ := decide(j, proposal{kind: groupwire.ChangeKindJoin, name: "b", addr: "h:9"}, false); changed || refuse != groupwire.RefusalReasonNameTaken {
		t.Fatalf("a live name: changed=%v refuse=%v", changed, refuse)
	}
	if _, _, refuse, _ := decide(j, proposal{kind: groupwire.ChangeKindJoin, name: "d"}, true); refuse != groupwire.RefusalReasonShuttingDown {
		t.Fatalf("a join in the barrier: refuse=%v", refuse)
	}
	l, changed, _, _ := decide(j, proposal{kind: groupwire.ChangeKindLeave, member: 2}, false)
	if !changed || l.has(2) || l.number != 3 || l.nextID != 4 {
		t.Fatalf("leave: %v", l)
	}
	// Idempotent: proposals are resent to a new sequencer.
	if again, changed, _, _ := decide(l, proposal{kind: groupwire.ChangeKindRemove, member: 2}, false); changed || !again.equal(l) {
		t.Fatalf("a second removal changed the view: %v", again)
	}
	// The name of a member gone is free: a new incarnation gets a new id.
	r, changed, _, _ := decide(l, proposal{kind: groupwire.ChangeKindJoin, name: "b", addr: "h:2"}, false)
	if m, _ := r.byName("b"); !changed || m.id != 4 {
		t.Fatalf("rejoin: %v", r)
	}
}

// TestDecideNearIDWrap: ids are never reused, so the last u32 id goes out
// once and the next join is refused instead of wrapping onto a fenced id.
func TestDecideNearIDWrap(t *testing.T) {
	v := groupView{number: 7, nextID: maxWorkerID - 1, members: []viewMember{{id: 1, name: "a"}}}
	v, _, _, _ = decide(v, proposal{kind: groupwire.ChangeKindJoin, name: "b"}, false)
	if m, _ := v.byName("b"); m.id != maxWorkerID-1 || v.nextID != maxWorkerID {
		t.Fatalf("next to last: %v next %d", v, v.nextID)
	}
	v, _, _, _ = decide(v, proposal{kind: groupwire.ChangeKindJoin, name: "c"}, false)
	if m, _ := v.byName("c"); m.id != maxWorkerID || v.nextID != 0 {
		t.Fatalf("last: %v next %d", v, v.nextID)
	}
	if _, changed, refuse, detail := decide(v, proposal{kind: groupwire.ChangeKindJoin, name: "d"}, false); changed || refuse != groupwire.RefusalReasonIDsExhausted || !strings.Contains(detail, "worker ids") {
		t.Fatalf("past the last: changed=%v refuse=%v %q", changed, refuse, detail)
	}
	// The exhausted view travels and is taken back as it was.
	w := v.wire()
	back, err := viewOf(&w)
	if err != nil || !back.equal(v) {
		t.Fatalf("round trip: %v %v", back, err)
	}
}

func TestClassifyAndChanges(t *testing.T) {
	v1 := firstView([]string{"a", "b", "c"}, []string{"1", "2", "3"})
	v2, _, _, _ := decide(v1, proposal{kind: groupwire.ChangeKindJoin, name: "d"}, false)
	v3, _, _, _ := decide(v2, proposal{kind: groupwire.ChangeKindRemove, member: 4}, false)
	v4, _, _, _ := decide(v3, proposal{kind: groupwire.ChangeKindLeave, member: 3}, false)
	for _, c := range []struct {
		cur, in groupView
		self    core.WorkerID
		want    viewAction
	}{{v2, v1, 1, viewStale}, {v2, v2, 1, viewStale}, {v1, v3, 1, viewApply}, {v3, v4, 3, viewExcluded}} {
		if got := classify(c.cur, c.in, c.self); got != c.want {
			t.Errorf("classify(%v, %v, %d) = %d, want %d", c.cur, c.in, c.self, got, c.want)
		}
	}
	// A skipped view: d joined and went in views this member never got.
	joined, gone := changes(v1, v4)
	if len(joined) != 0 || len(gone) != 1 || gone[0].id != 3 {
		t.Fatalf("changes: joined %v gone %v", joined, gone)
	}
	if s := v4.sequencer(func(id core.WorkerID) bool { return id == 1 }); s != 2 {
		t.Fatalf("sequencer with #1 dead: %d", s)
	}
}

func TestViewOfRefusesMalformed(t *testing.T) {
	for _, c := range []struct {
		name string
		m    groupwire.Membership
		want string
	}{
		{"number 0", groupwire.Membership{NextID: 2, Members: []groupwire.ViewMember{{ID: 1, Name: "a"}}}, "numbered 0"},
		{"id 0", groupwire.Membership{Number: 1, NextID: 2, Members: []groupwire.ViewMember{{ID: 0, Name: "a"}}}, "id 0"},
		{"out of order", groupwire.Membership{Number: 1, NextID: 3, Members: []groupwire.ViewMember{{ID: 2, Name: "a"}, {ID: 1, Name: "b"}}}, "out of order"},
		{"not given out", groupwire.Membership{Number: 1, NextID: 2, Members: []groupwire.ViewMember{{ID: 2, Name: "a"}}}, "not below"},
		{"duplicate name", groupwire.Membership{Number: 1, NextID: 3, Members: []groupwire.ViewMember{{ID: 1, Name: "a"}, {ID: 2, Name: "a"}}}, "not unique"},
		{"empty name", groupwire.Membership{Number: 1, NextID: 2, Members: []groupwire.ViewMember{{ID: 1}}}, "empty"},
	} {
		if _, err := viewOf(&c.m); err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "worker: ") {
			t.Errorf("%s: %v, want an error saying %q", c.name, err, c.want)
		}
	}
}
