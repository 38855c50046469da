package worker

import "testing"

// TestWireNames: a call's name carries its types' fingerprint, the callee
// reads it back, a name without one is unsigned, and a peer's unreadable
// fingerprint matches no function; the names are cached, not rebuilt.
func TestWireNames(t *testing.T) {
	wire := wireName[[2]int, int]("add")
	name, sig, signed := splitWireName(wire)
	want, _ := signature[[2]int, int]()
	if name != "add" || !signed || sig != want {
		t.Fatalf("%q: %q %x %v", wire, name, sig, signed)
	}
	if n, _, signed := splitWireName("add"); n != "add" || signed {
		t.Fatal("an unsigned name read as signed")
	}
	if _, sig, signed := splitWireName("add\x00zz"); !signed || sig == want || sig != badSignature {
		t.Fatalf("an unreadable fingerprint gave %x", sig)
	}
	if n := testing.AllocsPerRun(100, func() { _ = wireName[[2]int, int]("add") }); n != 0 {
		t.Fatalf("wireName allocates %.0f times once cached", n)
	}
}
