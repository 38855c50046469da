package spec

import (
	"sync"
	"testing"
)

// Bug (regression in e03be66): Machine.Lookup used to only read the
// transitions; it now builds its index on first use, writing m.index with
// no lock, so two goroutines looking up in one parsed spec (say, two
// gen.Generate calls, or a generator and a diagram, on one *Protocol) race.
// Run with -race.
func TestLookupIsRacy(t *testing.T) {
	p, err := Parse("door.rspec", []byte(`protocol door;
version 1;
machine Door { start state locked; final state gone; event open; event remove;
  on remove: locked -> gone; ignore open in locked; }
`))
	if err != nil {
		t.Fatal(err)
	}
	m := p.Machines[0]
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if tr := m.Lookup(m.States[0], m.Events[1]); tr == nil || tr.To != m.States[1] {
				t.Errorf("lookup: %+v", tr)
			}
		}()
	}
	wg.Wait()
}

// Bug: the README says numbers are "decimal or 0x hex", but the resolver
// parses them with strconv.ParseUint(raw, 0, 64): "010" is octal 8, and
// "0b11", "0o17" and "1_0" are accepted too. A code written 010 silently
// becomes 8 (and collides with a message declared = 8).
func TestNumbersAreDecimalOrHex(t *testing.T) {
	p, err := Parse("n.rspec", []byte("protocol n;\nversion 010;\nmessage A = 010 { }\nenum E: u8 { a = 0b11; b = 1_0; }\n"))
	if err != nil {
		t.Logf("refused (as the README's grammar says it should): %v", err)
		return
	}
	if p.Version != 10 || p.Messages[0].Code != 10 {
		t.Errorf("version 010 is %d and message code 010 is %d: the spec language's numbers are decimal", p.Version, p.Messages[0].Code)
	}
	t.Errorf("0b11 and 1_0 accepted as %d and %d: neither is decimal nor 0x hex", p.Enums[0].Values[0].Value, p.Enums[0].Values[1].Value)
}
