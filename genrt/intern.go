package genrt

import "hash/maphash"

// Interner returns one string for equal bytes, so that a decoder reused
// for a stream of messages allocates each string that repeats (a called
// function's name, an error kind) once instead of once a message.
//
// It keeps a string the second time it sees it within its last
// recentStrings misses, and at most MaxInterned strings of at most
// MaxInternLen bytes: strings that do not repeat (error texts with an id
// in them) pass through without taking the room of those that do, a
// string kept is never dropped, and a peer sending endless new strings
// costs no more memory than without it. Not safe for concurrent use: one
// per Decoder.
type Interner struct {
	kept   map[string]string
	recent [recentStrings]uint64 // hashes of strings seen once lately
	next   int
}

const (
	// MaxInterned strings are kept: far more than the functions a program
	// registers, and small beside the memory a peer may make a worker hold.
	MaxInterned = 1024
	// MaxInternLen bounds a kept string: names are short; a long string
	// is a payload, seldom repeated.
	MaxInternLen = 128
	// recentStrings is how many strings seen once are remembered (as
	// hashes) for a second sighting: a name called between that many
	// one-off strings is still found repeating.
	recentStrings = 64
)

// internSeed is fixed for the process; hashes never leave it.
var internSeed = maphash.MakeSeed()

// Intern returns b as a string, the same string every time for the same
// bytes once it is kept.
func (in *Interner) Intern(b []byte) string {
	if s, ok := in.kept[string(b)]; ok { // the conversion in a lookup allocates nothing
		return s
	}
	s := string(b)
	if len(s) > MaxInternLen || len(in.kept) >= MaxInterned {
		return s
	}
	h := maphash.Bytes(internSeed, b)
	for _, r := range in.recent {
		if r == h {
			if in.kept == nil {
				in.kept = make(map[string]string)
			}
			in.kept[s] = s
			return s
		}
	}
	in.recent[in.next] = h
	in.next = (in.next + 1) % recentStrings
	return s
}

// Len reports how many strings are kept.
func (in *Interner) Len() int { return len(in.kept) }
