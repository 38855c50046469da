package genrt

import (
	"fmt"
	"strings"
	"testing"
	"unsafe"
)

// TestInternerGivesOneStringAndStaysBounded: equal bytes give the very same
// string without allocating once kept; strings seen once and long strings
// are not kept; a hostile stream of repeated strings fills it to its bound
// and no further, and what it kept first still hits afterwards.
func TestInternerGivesOneStringAndStaysBounded(t *testing.T) {
	var in Interner
	in.Intern([]byte("add")) // seen once: passed through
	first := in.Intern([]byte("add"))
	again := in.Intern([]byte("add"))
	if first != again || unsafe.StringData(first) != unsafe.StringData(again) || in.Len() != 1 {
		t.Fatal("a string seen twice is not kept")
	}
	name := []byte("add")
	if n := testing.AllocsPerRun(100, func() { _ = in.Intern(name) }); n != 0 {
		t.Fatalf("a kept string allocates %.0f times", n)
	}
	long := strings.Repeat("x", MaxInternLen+1)
	if in.Intern([]byte(long)) != long || in.Len() != 1 {
		t.Fatalf("a string past MaxInternLen was kept (%d kept)", in.Len())
	}
	in.Intern([]byte(long))
	for i := range 10 * MaxInterned {
		s := fmt.Sprintf("one-off-%d", i)
		if got := in.Intern([]byte(s)); got != s {
			t.Fatalf("Intern(%q) = %q", s, got)
		}
	}
	if in.Len() != 1 {
		t.Fatalf("strings seen once were kept: %d", in.Len())
	}
	for i := range 10 * MaxInterned {
		s := []byte(fmt.Sprintf("hostile-%d", i))
		in.Intern(s)
		in.Intern(s) // a peer repeating every string fills it, and no more
	}
	if in.Len() != MaxInterned {
		t.Fatalf("%d strings kept, bound %d", in.Len(), MaxInterned)
	}
	if got := in.Intern([]byte("add")); unsafe.StringData(got) != unsafe.StringData(first) {
		t.Fatal("a string kept before the flood is no longer the same string")
	}
}

// TestConsumeStringInterns: with Limits.Strings set, ConsumeString returns
// the kept string; without it, a fresh one.
func TestConsumeStringInterns(t *testing.T) {
	frame := AppendBytes(nil, []byte("mul"))
	lim := DefaultLimits
	lim.Strings = &Interner{}
	ConsumeString(frame, &lim)
	a, _, err := ConsumeString(frame, &lim)
	b, _, err2 := ConsumeString(frame, &lim)
	if err != nil || err2 != nil || a != "mul" || unsafe.StringData(a) != unsafe.StringData(b) {
		t.Fatalf("interned decode: %q %q %v %v", a, b, err, err2)
	}
	c, _, _ := ConsumeString(frame, &DefaultLimits)
	if c != "mul" || unsafe.StringData(c) == unsafe.StringData(a) {
		t.Fatal("a decode without an interner shared a string")
	}
}
