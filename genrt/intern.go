package genrt

// Interner returns one string for equal bytes, so that a decoder reused
// for a stream of messages allocates each string that repeats (a called
// function's name, an error kind) once instead of once a message.
//
// It is bounded: it keeps at most MaxInterned strings of at most
// MaxInternLen bytes and, once full, allocates as if it were not there,
// so a peer that sends endless new strings costs no more memory than
// without it, and a string it keeps is never dropped, so the hits stay
// hits. Not safe for concurrent use: one per Decoder.
type Interner struct {
	m map[string]string
}

const (
	// MaxInterned strings are kept: far more than the functions a program
	// registers, and small beside the memory a peer may make a worker hold.
	MaxInterned = 1024
	// MaxInternLen bounds a kept string: names are short; a long string
	// is a payload, seldom repeated.
	MaxInternLen = 128
)

// Intern returns b as a string, the same string every time for the same
// bytes once it is kept.
func (in *Interner) Intern(b []byte) string {
	if s, ok := in.m[string(b)]; ok { // the conversion in a lookup allocates nothing
		return s
	}
	s := string(b)
	if len(s) <= MaxInternLen && len(in.m) < MaxInterned {
		if in.m == nil {
			in.m = make(map[string]string)
		}
		in.m[s] = s
	}
	return s
}

// Len reports how many strings are kept.
func (in *Interner) Len() int { return len(in.m) }
