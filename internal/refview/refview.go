// Package refview joins members' reference snapshots (worker.Refs) into
// the group's picture, grouped by member or by value, filtered and sorted,
// with each value's fork tree laid out: the one model behind the debug
// listener's page (runtime/observe) and rrefgen refs.
package refview

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/rrefkit/rref/runtime/worker"
)

// Doc is what a debug listener serves at /debug/rrefs: the snapshots of
// the members it serves, and, in a page's own join, the members' listeners
// that did not answer.
type Doc struct {
	Members     []worker.RefsSnapshot `json:"members"`
	Unreachable []string              `json:"unreachable,omitempty"`
}

// Merge joins docs, each member once (the first snapshot of a name wins:
// a member served by two listeners is one member).
func Merge(docs ...Doc) Doc {
	var out Doc
	seen := map[string]bool{}
	for _, d := range docs {
		for _, m := range d.Members {
			if !seen[m.Member] {
				seen[m.Member] = true
				out.Members = append(out.Members, m)
			}
		}
		out.Unreachable = append(out.Unreachable, d.Unreachable...)
	}
	slices.SortFunc(out.Members, func(a, b worker.RefsSnapshot) int { return cmp.Compare(a.Member, b.Member) })
	return out
}

// ErrQuery marks a query refview cannot answer: an unknown grouping or
// order.
var ErrQuery = errors.New("refview: bad query")

// Grouping and order of a query.
const (
	ByMember = "member"
	ByValue  = "value"
	SortAge  = "age"
	SortSize = "size"
)

// Query says how to show a group: grouped by member or by value, sorted by
// age (oldest first) or size (largest first), keeping only what a Go type
// or a creation site contains (case-insensitive; empty: everything).
type Query struct {
	By, Sort   string
	Type, Site string
}

// ParseQuery checks a query's words; empty ones take the defaults (by
// member, by age).
func ParseQuery(by, sort, typ, site string) (Query, error) {
	q := Query{By: cmp.Or(by, ByMember), Sort: cmp.Or(sort, SortAge), Type: typ, Site: site}
	if q.By != ByMember && q.By != ByValue {
		return q, fmt.Errorf("%w: by %q: want %s or %s", ErrQuery, by, ByMember, ByValue)
	}
	if q.Sort != SortAge && q.Sort != SortSize {
		return q, fmt.Errorf("%w: sort %q: want %s or %s", ErrQuery, sort, SortAge, SortSize)
	}
	return q, nil
}

// Value is one value as the group sees it: its owner's record, when the
// owner is among the members shown, and every member's references to it.
type Value struct {
	ID    string `json:"id"`
	Owner string `json:"owner"`
	// Seen: the owner's snapshot lists it. A value whose owner is not
	// among the members shown (or that its owner freed meanwhile) is
	// known only from the references to it.
	Seen  bool              `json:"seen"`
	State worker.ValueState `json:"state,omitempty"`
	Type  string            `json:"type,omitempty"`
	Size  int               `json:"size"` // -1 when unknown
	Age   time.Duration     `json:"age_ns,omitempty"`
	// Site is where it was made: the owner's own note, or the site of a
	// reference made by the Remote that created it (references keep the
	// site they were made at; a Clone its original's).
	Site           string             `json:"site,omitempty"`
	Failure        string             `json:"failure,omitempty"`
	Function       string             `json:"function,omitempty"`
	Program        int                `json:"program"`
	Forks          []worker.KnownFork `json:"forks"`
	WaitingFetches int                `json:"waiting_fetches,omitempty"`
	Refs           []Ref              `json:"references"`
	// Lent counts copies in flight to members, pinned by their lenders,
	// over all the references shown.
	Lent int `json:"lent"`
}

// Ref is one member's reference, with what the group knows of its value
// (its type and size from the owner, when shown).
type Ref struct {
	Member string `json:"member"`
	worker.HeldRefInfo
	Size int `json:"size"` // the value's, -1 when unknown
}

// Member is one member's own picture: the values it owns and the
// references it holds.
type Member struct {
	Name   string    `json:"member"`
	Taken  time.Time `json:"taken"`
	Sites  bool      `json:"sites"`
	Values []*Value  `json:"values"`
	Refs   []Ref     `json:"references"`
}

// Group is members' snapshots joined on their ids.
type Group struct {
	Members     []Member
	Values      []*Value // by id
	Unreachable []string
	byID        map[string]*Value
}

// Join joins a doc's snapshots: each value with its owner's record and
// every reference to it, and each reference with its value's type and
// size where the owner's snapshot has them.
func Join(d Doc) *Group {
	d = Merge(d) // each member once, by name
	g := &Group{byID: map[string]*Value{}, Unreachable: d.Unreachable}
	value := func(id, owner string) *Value {
		v := g.byID[id]
		if v == nil {
			v = &Value{ID: id, Owner: owner, Size: -1}
			g.byID[id] = v
		}
		return v
	}
	for _, s := range d.Members {
		for _, ov := range s.Values {
			v := value(ov.ID, s.Member)
			v.Seen, v.State, v.Type, v.Size, v.Age = true, ov.State, ov.Type, ov.Size, ov.Age
			v.Failure, v.Function, v.Program, v.Forks, v.WaitingFetches = ov.Failure, ov.Function, ov.Program, ov.Forks, ov.WaitingFetches
			v.Site = cmp.Or(ov.Site, v.Site)
		}
	}
	for _, s := range d.Members {
		for _, r := range s.References {
			v := value(r.Value, r.Owner)
			v.Refs = append(v.Refs, Ref{Member: s.Member, HeldRefInfo: r})
			v.Lent += len(r.Lent)
			if v.Site == "" {
				v.Site = r.Site
			}
			v.Type = cmp.Or(v.Type, r.Type)
		}
	}
	for _, v := range g.byID {
		for i := range v.Refs {
			r := &v.Refs[i]
			r.Type, r.Site, r.Size = cmp.Or(r.Type, v.Type), cmp.Or(r.Site, v.Site), v.Size
		}
		g.Values = append(g.Values, v)
	}
	slices.SortFunc(g.Values, func(a, b *Value) int { return cmp.Compare(a.ID, b.ID) })
	for _, s := range d.Members {
		m := Member{Name: s.Member, Taken: s.Taken, Sites: s.Sites}
		for _, ov := range s.Values {
			m.Values = append(m.Values, g.byID[ov.ID])
		}
		for _, v := range g.Values {
			for _, r := range v.Refs {
				if r.Member == s.Member {
					m.Refs = append(m.Refs, r)
				}
			}
		}
		g.Members = append(g.Members, m)
	}
	return g
}

// Value returns the value of id, or nil.
func (g *Group) Value(id string) *Value { return g.byID[id] }

// Counts are a group's totals, for a summary line.
type Counts struct {
	Members, Values, References, Held, Lent int
	ByState                                 map[worker.RefState]int
}

// Count totals the group.
func (g *Group) Count() Counts {
	c := Counts{Members: len(g.Members), ByState: map[worker.RefState]int{}}
	for _, v := range g.Values {
		if v.Seen {
			c.Values++
		}
		c.Lent += v.Lent
		for _, r := range v.Refs {
			c.References++
			c.ByState[r.State]++
			if r.Held {
				c.Held++
			}
		}
	}
	return c
}

// matches reports whether what contains want, ignoring case; an empty
// want matches everything.
func matches(what, want string) bool {
	return want == "" || strings.Contains(strings.ToLower(what), strings.ToLower(want))
}

func (q Query) keepValue(v *Value) bool { return matches(v.Type, q.Type) && matches(v.Site, q.Site) }
func (q Query) keepRef(r Ref) bool      { return matches(r.Type, q.Type) && matches(r.Site, q.Site) }

// order compares two rows by the query's order: the larger age or size
// first, an unknown one last, then by id.
func (q Query) order(ageA, ageB time.Duration, sizeA, sizeB int, idA, idB string) int {
	if q.Sort == SortSize {
		if c := cmp.Compare(sizeB, sizeA); c != 0 {
			return c
		}
	} else if c := cmp.Compare(ageB, ageA); c != 0 {
		return c
	}
	return cmp.Compare(idA, idB)
}

// ValuesBy are the group's values the query keeps, in its order, each with
// its references.
func (g *Group) ValuesBy(q Query) []*Value {
	var out []*Value
	for _, v := range g.Values {
		if q.keepValue(v) {
			out = append(out, v)
		}
	}
	slices.SortFunc(out, func(a, b *Value) int { return q.order(a.Age, b.Age, a.Size, b.Size, a.ID, b.ID) })
	return out
}

// MembersBy are the members, each with the values it owns and the
// references it holds that the query keeps, in its order.
func (g *Group) MembersBy(q Query) []Member {
	out := make([]Member, 0, len(g.Members))
	for _, m := range g.Members {
		k := Member{Name: m.Name, Taken: m.Taken, Sites: m.Sites}
		for _, v := range m.Values {
			if q.keepValue(v) {
				k.Values = append(k.Values, v)
			}
		}
		for _, r := range m.Refs {
			if q.keepRef(r) {
				k.Refs = append(k.Refs, r)
			}
		}
		slices.SortFunc(k.Values, func(a, b *Value) int { return q.order(a.Age, b.Age, a.Size, b.Size, a.ID, b.ID) })
		slices.SortFunc(k.Refs, func(a, b Ref) int { return q.order(a.Age, b.Age, a.Size, b.Size, a.Fork, b.Fork) })
		out = append(out, k)
	}
	return out
}

// Short is an id as a table shows it: its minter and the first digits of
// its number, as the LeakError names values.
func Short(id string) string {
	const digits = 6
	i := strings.LastIndexByte(id, ':')
	if i < 0 || len(id)-i-1 <= digits {
		return id
	}
	return id[:i+1+digits]
}

// ShortSite is a creation site as a table shows it: its file's folder and
// name, and the line.
func ShortSite(site string) string {
	parts := strings.Split(site, "/")
	if len(parts) <= 2 {
		return site
	}
	return strings.Join(parts[len(parts)-2:], "/")
}

// Age is an age as a table shows it: to the millisecond under a minute,
// to the second beyond; "-" when not known.
func Age(d time.Duration) string {
	switch {
	case d <= 0:
		return "-"
	case d < time.Minute:
		return d.Round(time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

// Size is a size as a table shows it; "-" when not known.
func Size(n int) string {
	if n < 0 {
		return "-"
	}
	return fmt.Sprintf("%d B", n)
}
