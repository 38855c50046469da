package conformance

import (
	"encoding/binary"
	"hash/maphash"
)

// digest is a 128-bit fingerprint of an encoding: the world's state key is
// built from its parts' digests, each computed once when the part changes,
// instead of from their whole encodings for every state. Two lanes with
// independent seeds, as explore's own fingerprints: a collision merges two
// states, and at 2^-128 a pair it is never the likeliest error.
type digest [2]uint64

// digestSeeds are fixed for the process: every search in it, on any
// number of workers, fingerprints alike.
var digestSeeds = [2]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed()}

func digestOf(b []byte) digest {
	return digest{maphash.Bytes(digestSeeds[0], b), maphash.Bytes(digestSeeds[1], b)}
}

// add combines digests as a multiset: the sum of the messages in flight
// does not depend on their order, and needs no sort. With independent,
// uniformly distributed digests, two different multisets sum alike with
// the probability of one collision.
func (d digest) add(e digest) digest { return digest{d[0] + e[0], d[1] + e[1]} }

func (d digest) append(b []byte) []byte {
	b = binary.LittleEndian.AppendUint64(b, d[0])
	return binary.LittleEndian.AppendUint64(b, d[1])
}
