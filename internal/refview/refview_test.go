package refview

import (
	"errors"
	"testing"
	"time"

	"github.com/rrefkit/rref/runtime/worker"
)

// doc is a group of three: B owns v1 (an int, made by A's Remote) and v2
// (a string B made itself); A holds v1 and lent a copy to C, which C
// already holds; C holds v3, whose owner D is not among the snapshots.
func doc() Doc {
	const (
		v1, v2, v3   = "A:00000000000000a1", "B:00000000000000b2", "A:00000000000000c3"
		fA, fC, fC3  = "A:00000000000000f1", "A:00000000000000f2", "C:00000000000000f3"
		fLent, fOrph = "A:00000000000000f4", "D:00000000000000f5"
	)
	return Doc{Members: []worker.RefsSnapshot{
		{Member: "C", References: []worker.HeldRefInfo{
			{Value: v1, Fork: fC, Parent: fA, From: "A", Owner: "B", State: worker.RefConfirmed, Held: true},
			{Value: v3, Fork: fC3, Parent: fOrph, Owner: "D", State: worker.RefOrphaned, Held: true, Cut: "owner_failed"},
		}},
		{Member: "A", Sites: true, References: []worker.HeldRefInfo{
			{Value: v1, Fork: fA, Owner: "B", State: worker.RefPinned, Held: true, Type: "int", Site: "/src/app/main.go:12", Age: 3 * time.Second,
				Lent: []worker.LentCopy{{Fork: fC, To: "C"}, {Fork: fLent, To: "D"}}},
		}},
		{Member: "B", Values: []worker.OwnedValue{
			{ID: v1, Type: "int", Size: 2, State: worker.ValueReady, Age: 3 * time.Second, Forks: []worker.KnownFork{{ID: fA, Holder: "A"}, {ID: fC, Holder: "C"}}},
			{ID: v2, Type: "string", Size: 900, State: worker.ValueReady, Age: time.Second, Program: 1, Site: "/src/app/b.go:40"},
		}},
		{Member: "A", Values: []worker.OwnedValue{{ID: "A:dup"}}}, // a second snapshot of A: the first wins
	}}
}

func TestJoinGroupsByValueAndMember(t *testing.T) {
	g := Join(doc())
	if len(g.Members) != 3 || g.Members[0].Name != "A" || g.Members[2].Name != "C" {
		t.Fatalf("members: %+v", g.Members)
	}
	v1 := g.Value("A:00000000000000a1")
	if v1 == nil || !v1.Seen || v1.Owner != "B" || len(v1.Refs) != 2 || v1.Lent != 2 || v1.Site != "/src/app/main.go:12" {
		t.Fatalf("v1 joined: %+v", v1)
	}
	for _, r := range v1.Refs {
		if r.Type != "int" || r.Size != 2 || r.Site != "/src/app/main.go:12" {
			t.Errorf("v1's reference on %s lacks its value's type, size or site: %+v", r.Member, r)
		}
	}
	v3 := g.Value("A:00000000000000c3")
	if v3 == nil || v3.Seen || v3.Owner != "D" || v3.Size != -1 {
		t.Fatalf("a value whose owner is not shown: %+v", v3)
	}
	c := g.Count()
	if c.Members != 3 || c.Values != 2 || c.References != 3 || c.Held != 3 || c.Lent != 2 ||
		c.ByState[worker.RefPinned] != 1 || c.ByState[worker.RefOrphaned] != 1 {
		t.Fatalf("counts: %+v", c)
	}

	bySize := g.ValuesBy(Query{By: ByValue, Sort: SortSize})
	if len(bySize) != 3 || bySize[0].ID != "B:00000000000000b2" || bySize[2].Size != -1 {
		t.Fatalf("by size, the largest first and the unknown last: %v %v %v", bySize[0].ID, bySize[1].ID, bySize[2].ID)
	}
	byAge := g.ValuesBy(Query{By: ByValue, Sort: SortAge})
	if byAge[0].ID != "A:00000000000000a1" {
		t.Fatalf("by age, the oldest first: %v", byAge[0].ID)
	}
	if got := g.ValuesBy(Query{Sort: SortAge, Type: "STRING"}); len(got) != 1 || got[0].ID != "B:00000000000000b2" {
		t.Fatalf("type filter: %+v", got)
	}
	ms := g.MembersBy(Query{Sort: SortAge, Site: "main.go"})
	if len(ms) != 3 || len(ms[0].Refs) != 1 || len(ms[1].Values) != 1 || ms[1].Values[0].Type != "int" || len(ms[2].Refs) != 1 {
		t.Fatalf("site filter by member: %+v", ms)
	}
}

func TestTreeDrawsOwnerForksAndCopiesInFlight(t *testing.T) {
	g := Join(doc())
	tr, ok := g.Tree("A:00000000000000a1")
	if !ok {
		t.Fatal("no tree")
	}
	want := map[string]string{ // id -> kind
		"A:00000000000000a1": NodeOwner, "A:00000000000000f1": NodeFork, "A:00000000000000f2": NodeFork, "A:00000000000000f4": NodeLent,
	}
	if len(tr.Nodes) != len(want) || len(tr.Edges) != len(want)-1 || tr.Hidden != 0 {
		t.Fatalf("tree: %+v", tr)
	}
	at := map[string]Node{}
	for _, n := range tr.Nodes {
		if want[n.ID] != n.Kind {
			t.Errorf("node %s is a %s, want %s", n.ID, n.Kind, want[n.ID])
		}
		at[n.ID] = n
	}
	// A's fork hangs from the owner, C's copy and the one in flight to D
	// from A's, a level lower; the copy in flight is dashed.
	if at["A:00000000000000f1"].Y <= at["A:00000000000000a1"].Y || at["A:00000000000000f2"].Y <= at["A:00000000000000f1"].Y ||
		at["A:00000000000000f4"].Y != at["A:00000000000000f2"].Y || at["A:00000000000000f4"].Member != "D" {
		t.Fatalf("levels: %+v", tr.Nodes)
	}
	dashed := 0
	for _, e := range tr.Edges {
		if e.Dashed {
			dashed++
		}
		if e.X2 < 0 || e.X2 > tr.Width || e.Y2 > tr.Height {
			t.Errorf("edge outside the drawing: %+v (%dx%d)", e, tr.Width, tr.Height)
		}
	}
	if dashed != 1 {
		t.Fatalf("%d dashed edges, want the copy in flight's alone: %+v", dashed, tr.Edges)
	}
	if _, ok := g.Tree("nope"); ok {
		t.Fatal("a tree for an unknown value")
	}
	// A parent the tree lacks, or a cycle, hangs from the owner.
	orphan, _ := g.Tree("A:00000000000000c3")
	if len(orphan.Nodes) != 2 || !orphan.Edges[0].Dashed {
		t.Fatalf("a reference whose parent is unknown: %+v", orphan)
	}
	cyc := Join(Doc{Members: []worker.RefsSnapshot{{Member: "X", References: []worker.HeldRefInfo{
		{Value: "V:1", Fork: "X:1", Parent: "X:2", Owner: "V"}, {Value: "V:1", Fork: "X:2", Parent: "X:1", Owner: "V"}}}}})
	if ct, _ := cyc.Tree("V:1"); len(ct.Nodes) != 3 {
		t.Fatalf("a cycle of parents: %+v", ct)
	}
}

func TestParseQuery(t *testing.T) {
	if q, err := ParseQuery("", "", "", ""); err != nil || q.By != ByMember || q.Sort != SortAge {
		t.Fatalf("defaults: %+v %v", q, err)
	}
	for _, bad := range [][2]string{{"owner", ""}, {"", "name"}} {
		if _, err := ParseQuery(bad[0], bad[1], "", ""); !errors.Is(err, ErrQuery) {
			t.Errorf("%q: %v, want ErrQuery", bad, err)
		}
	}
	if got := URL("127.0.0.1:9100"); got != "http://127.0.0.1:9100/debug/rrefs" {
		t.Errorf("URL: %s", got)
	}
	if got := URL("https://h:1/debug/rrefs"); got != "https://h:1/debug/rrefs" {
		t.Errorf("URL: %s", got)
	}
	if Short("A:0123456789abcdef") != "A:012345" || ShortSite("/a/b/c.go:3") != "b/c.go:3" || Age(0) != "-" || Size(-1) != "-" {
		t.Error("table forms")
	}
}
