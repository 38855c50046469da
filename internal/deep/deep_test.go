package deep

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

type inner struct {
	n    int
	tags []string
}

type holder struct {
	Name   string
	seen   map[string]uint64
	queue  []inner
	shared *inner
	also   *inner // the same pointer as shared
	any    any
	fixed  [2]inner
	none   *inner
}

func sample() *holder {
	in := &inner{n: 7, tags: []string{"a"}}
	return &holder{
		Name:   "h",
		seen:   map[string]uint64{"x": 1, "y": 2, "z": 3},
		queue:  []inner{{1, []string{"q"}}},
		shared: in, also: in,
		any:   inner{n: 3, tags: []string{"i"}},
		fixed: [2]inner{{n: 1}, {n: 2, tags: []string{"f"}}},
	}
}

func encode(t *testing.T, v any) string {
	t.Helper()
	b, err := Append(nil, v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestCopySharesNothing: writing through every path of a copy leaves the
// original's encoding as it was, and the copy keeps its own sharing.
func TestCopySharesNothing(t *testing.T) {
	h := sample()
	before := encode(t, h)
	c, err := Copy(h)
	if err != nil {
		t.Fatal(err)
	}
	if encode(t, c) != before {
		t.Fatal("a copy encodes unlike its original")
	}
	c.seen["x"] = 9
	c.queue[0].tags[0] = "changed"
	c.shared.n = 8
	c.shared.tags[0] = "changed"
	c.any.(inner).tags[0] = "changed"
	c.fixed[1].tags[0] = "changed"
	if encode(t, h) != before {
		t.Fatal("writing the copy changed the original")
	}
	if c.also != c.shared || c.also.n != 8 {
		t.Fatal("the copy lost the sharing of its two pointers")
	}
}

// TestEncodingIsCanonical: map order does not show, every field does,
// and sharing shows.
func TestEncodingIsCanonical(t *testing.T) {
	a, b := sample(), sample()
	b.seen = map[string]uint64{}
	for _, k := range []string{"z", "y", "x"} {
		b.seen[k] = a.seen[k]
	}
	if encode(t, a) != encode(t, b) {
		t.Fatal("equal maps built in different orders encode differently")
	}
	for name, change := range map[string]func(h *holder){
		"unexported map value": func(h *holder) { h.seen["y"] = 5 },
		"nested slice":         func(h *holder) { h.queue[0].tags = append(h.queue[0].tags, "r") },
		"interface":            func(h *holder) { h.any = 3 },
		"array":                func(h *holder) { h.fixed[0].n = 4 },
		"nil pointer":          func(h *holder) { h.none = &inner{} },
		"sharing":              func(h *holder) { h.also = &inner{n: 7, tags: []string{"a"}} },
	} {
		c := sample()
		change(c)
		if encode(t, c) == encode(t, a) {
			t.Errorf("%s: the change does not show in the encoding", name)
		}
	}
}

func TestFuncsAreRefused(t *testing.T) {
	v := struct {
		ok int
		f  func()
	}{f: func() {}}
	if _, err := Append(nil, v); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("encode: %v, want ErrUnsupported", err)
	}
	if _, err := Copy(v); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("copy: %v, want ErrUnsupported", err)
	}
}

func TestFlatCopyIsTheValue(t *testing.T) {
	type pair struct{ a, b int }
	got, err := Copy(pair{1, 2})
	if err != nil || !cmp.Equal(got, pair{1, 2}, cmp.AllowUnexported(pair{})) {
		t.Fatalf("%v %v", got, err)
	}
}

// name is a type of names, as protocol.NodeID is.
type name string

type named struct {
	Self    name
	Label   string
	Peers   []name
	Seen    map[name]uint64
	Holders map[name]bool
	Any     any
	Pair    [2]name
	Ptr     *name
}

func namesSample() *named {
	p := name("b")
	return &named{Self: "a", Label: "a", Peers: []name{"a", "b", "c"}, Seen: map[name]uint64{"a": 1, "b": 2},
		Holders: map[name]bool{"c": true}, Any: name("b"), Pair: [2]name{"b", "a"}, Ptr: &p}
}

// swap renames a and b into each other.
var swap = &Names{Type: reflect.TypeOf(name("")), Rename: func(s string) string {
	switch s {
	case "a":
		return "b"
	case "b":
		return "a"
	}
	return s
}}

// TestNamesRenameEverywhere: a copy renamed holds the new names in every
// place, other strings untouched, and encodes as AppendNames encodes the
// original; a map's encoding follows its renamed keys, so that it is the
// encoding of the map built with them.
func TestNamesRenameEverywhere(t *testing.T) {
	h := namesSample()
	before := encode(t, h)
	c, err := CopyNames(h, swap)
	if err != nil {
		t.Fatal(err)
	}
	if encode(t, h) != before {
		t.Fatal("renaming a copy changed the original")
	}
	q := name("a")
	want := &named{Self: "b", Label: "a", Peers: []name{"b", "a", "c"}, Seen: map[name]uint64{"b": 1, "a": 2},
		Holders: map[name]bool{"c": true}, Any: name("a"), Pair: [2]name{"a", "b"}, Ptr: &q}
	if diff := cmp.Diff(want, c); diff != "" {
		t.Fatalf("renamed copy (-want +got):\n%s", diff)
	}
	renamed, err := AppendNames(nil, h, swap)
	if err != nil {
		t.Fatal(err)
	}
	if string(renamed) != encode(t, want) {
		t.Fatal("AppendNames differs from the encoding of the renamed value")
	}
	if again, _ := AppendNames(nil, want, swap); string(again) != before {
		t.Fatal("renaming twice by a swap is not the identity")
	}
	// A flat value with names is walked too.
	if p, _ := CopyNames([2]name{"a", "z"}, swap); p != [2]name{"b", "z"} {
		t.Fatalf("flat array renamed to %v", p)
	}
}

// TestNamesOtherSeesPlainStrings: every string not of the names' type is
// shown to Other, with its path, and its error stops the encoding.
func TestNamesOtherSeesPlainStrings(t *testing.T) {
	var met []string
	stop := errors.New("stop")
	n := &Names{Type: reflect.TypeOf(name("")), Other: func(s string) error {
		met = append(met, s)
		if s == "bad" {
			return stop
		}
		return nil
	}}
	if _, err := AppendNames(nil, &named{Label: "x", Any: "y", Seen: map[name]uint64{"k": 1}}, n); err != nil {
		t.Fatal(err)
	}
	if want := []string{"x", "y"}; !cmp.Equal(met, want) {
		t.Fatalf("Other met %q, want %q", met, want)
	}
	_, err := AppendNames(nil, &named{Seen: map[name]uint64{"k": 1}, Any: map[string]int{"ok": 1, "bad": 2}}, n)
	if !errors.Is(err, stop) || !strings.HasSuffix(err.Error(), ", at (*value).Any key") {
		t.Fatalf("Other's error: %v", err)
	}
}

// TestManyPointersKeepTheirSharing: past the first pointers met (kept in a
// list), the encoding still tells a pointer met again from an equal one.
func TestManyPointersKeepTheirSharing(t *testing.T) {
	list := func(share bool) []*inner {
		var l []*inner
		for i := range 40 {
			l = append(l, &inner{n: i})
		}
		last := &inner{n: 30}
		if share {
			last = l[30]
		}
		return append(l, last)
	}
	shared, apart := encode(t, list(true)), encode(t, list(false))
	if shared == apart {
		t.Fatal("a pointer met again encodes as an equal one")
	}
	if encode(t, list(true)) != shared {
		t.Fatal("equal values encode differently")
	}
	c, err := Copy(list(true))
	if err != nil || c[40] != c[30] || encode(t, c) != shared {
		t.Fatalf("copy: %v, sharing kept %v", err, c[40] == c[30])
	}
}
