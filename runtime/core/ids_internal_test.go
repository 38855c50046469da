package core

import (
	"testing"

	"github.com/rrefkit/rref/generated/rref"
)

// newID never mints an id this worker still records under its own name:
// the values the generator will draw next are planted as live records, and
// minting must skip every one of them.
func TestNewIDSkipsIDsInUse(t *testing.T) {
	c := New(1, WithIDSeed([32]byte{7}))
	peek := *c.ids // a copy: the values c will draw next
	next := make([]uint64, 6)
	for i := range next {
		next[i] = peek.Uint64()
	}
	c.owners.put(RRefID{Worker: 1, Local: next[0]}, &ownerRec{})
	c.tombstone(RRefID{Worker: 1, Local: next[1]}, rref.ErrorKindDeleted)
	c.users.put(ForkID{Worker: 1, Local: next[2]}, &userRec{})
	c.pins.put(ForkID{Worker: 1, Local: next[3]}, &pinRec{})
	c.goneForks.add(ForkID{Worker: 1, Local: next[4]}, struct{}{})
	if got := c.newID(); got != next[5] {
		t.Fatalf("minted %d, want %d: the five before it are in use", got, next[5])
	}
	if c.drawn != 6 {
		t.Fatalf("drew %d values, want 6", c.drawn)
	}
}

// An owner's fork of a value is recorded only in that value's forks, which
// idTaken does not look into: fork skips one already there.
func TestOwnerForkSkipsItsForks(t *testing.T) {
	c := New(2, WithIDSeed([32]byte{8}))
	h := c.NewLocal([]byte("v"))
	id := c.handles[h].rref
	peek := *c.ids
	taken, free := peek.Uint64(), peek.Uint64()
	c.owners.at(id).forks.put(ForkID{Worker: 2, Local: taken}, forkRec{state: rref.ForkKnown, holder: 3})
	d := c.fork(c.handles[h], 3)
	if d.Fork.Local != free {
		t.Fatalf("minted fork %d, want %d (%d is a fork of the value already)", d.Fork.Local, free, taken)
	}
}
