package conformance

import (
	"bytes"
	"encoding/binary"
	"slices"
	"sync"

	"github.com/rrefkit/rref/explore"
	"github.com/rrefkit/rref/generated/rref"
	"github.com/rrefkit/rref/runtime/core"
)

// Two deliveries to one worker conflict over its core, yet most commute:
// a crash notice and a message from a third worker, two acks for
// different forks. The world answers explore.Reorderer's question for
// them by trying both orders on copies of the core alone, and remembers
// the answer by the core's digest and the two messages.
//
// The answer is the world's answer only when the two steps do nothing
// more to the core than deliver their messages: their outputs hold no
// function to run and no call's result, which the world would play back
// into the core (and for which it reads the core again). Then the core
// takes the same two inputs in either order; if it ends in the same state
// and each delivery emits, in either order, exactly what it emits alone,
// the world processes the same outputs in both orders, and what that
// processing reads and writes of the rest of the world is in the
// footprints, which must be independent apart from the core.

// commuteKey is a cached question: the core's digest and the two
// messages', under the mutant in effect (the core's behaviour).
type commuteKey struct {
	core   core.Digest
	a, b   digest
	mutant int
}

// commuteCache holds the answers about the production core, for every
// search of the process: digests are the process's, and the many small
// searches of an enumeration ask the same questions again. A search with
// a core factory of its own keeps a cache of its own (world.commutes).
// It is bounded: past the bound it starts again, as it is only a cache.
var commuteCache = struct {
	sync.Mutex
	m map[commuteKey]bool
}{m: map[commuteKey]bool{}}

// commuteCacheMax bounds a cache at about 6 MB: far more than the
// distinct (core, message, message) triples of any corpus scenario.
const commuteCacheMax = 1 << 16

// Commutes reports whether deliveries a and b, both in flight in w,
// commute here although their footprints conflict (explore.Reorderer).
func (w *world) Commutes(a, b explore.Event, fa, fb *explore.Footprint) bool {
	if a[0] == cmdEvent || b[0] == cmdEvent {
		return false
	}
	ia := slices.IndexFunc(w.inflight, func(m inFlight) bool { return m.digest == digest(a) })
	ib := slices.IndexFunc(w.inflight, func(m inFlight) bool { return m.digest == digest(b) })
	if ia < 0 || ib < 0 {
		return false
	}
	ma, mb := w.inflight[ia], w.inflight[ib]
	to := ma.to
	if mb.to != to || w.slots[to-1].dead || !fa.IndependentExcept(fb, explore.Location(tableCore, uint64(to))) {
		return false
	}
	c := w.slots[to-1].held.core // read only: the copies below are what change
	key := commuteKey{core: c.StateDigest(), a: ma.digest, b: mb.digest, mutant: activeMutant()}
	if cmpDigest(key.a, key.b) > 0 {
		key.a, key.b = key.b, key.a
	}
	if w.commutes != nil { // a core factory's own
		if ok, seen := (*w.commutes)[key]; seen {
			return ok
		}
		ok := coresCommute(c, ma, mb)
		remember(*w.commutes, key, ok)
		return ok
	}
	commuteCache.Lock()
	ok, seen := commuteCache.m[key]
	commuteCache.Unlock()
	if seen {
		return ok
	}
	ok = coresCommute(c, ma, mb)
	commuteCache.Lock()
	remember(commuteCache.m, key, ok)
	commuteCache.Unlock()
	return ok
}

func remember(m map[commuteKey]bool, k commuteKey, ok bool) {
	if len(m) >= commuteCacheMax {
		clear(m)
	}
	m[k] = ok
}

// coresCommute tries deliveries a and b in both orders on copies of c.
func coresCommute(c *core.Core, a, b inFlight) bool {
	ab, b1 := c.Clone(), c.Clone()
	outA1, okA1 := deliverAlone(ab, a)
	outB2, okB2 := deliverAlone(ab, b)
	outB1, okB1 := deliverAlone(b1, b)
	outA2, okA2 := deliverAlone(b1, a)
	return okA1 && okB2 && okB1 && okA2 &&
		bytes.Equal(outA1, outA2) && bytes.Equal(outB1, outB2) && ab.StateDigest() == b1.StateDigest()
}

// deliverAlone delivers m to c and encodes what c emits; false when the
// outputs hold something the world would play back into the core.
func deliverAlone(c *core.Core, m inFlight) ([]byte, bool) {
	m.handTo(c)
	r := c.TakeReady()
	if len(r.Runs) > 0 || len(r.Calls) > 0 || c.HasReady() {
		return nil, false
	}
	var b []byte
	for _, e := range r.Messages {
		b = binary.AppendUvarint(b, uint64(e.To))
		b = rref.AppendFrame(b, e.Msg)
	}
	b = append(b, '|')
	for _, f := range r.Freed {
		b = binary.AppendUvarint(b, uint64(f.RRef.Worker))
		b = binary.AppendUvarint(b, f.RRef.Local)
	}
	b = append(b, '|')
	for _, f := range r.Fetches {
		b = binary.AppendUvarint(b, f.FetchID)
		b = binary.AppendUvarint(b, uint64(f.Handle))
		b = binary.AppendUvarint(b, uint64(f.Err))
		b = binary.AppendUvarint(b, uint64(len(f.Value)))
		b = append(b, f.Value...)
		b = binary.AppendUvarint(b, uint64(len(f.Message)))
		b = append(b, f.Message...)
		b = binary.AppendUvarint(b, uint64(len(f.Code)))
		b = append(b, f.Code...)
	}
	b = append(b, '|')
	for _, x := range r.Cancels {
		b = binary.AppendUvarint(b, uint64(x.From))
		b = binary.AppendUvarint(b, x.CallID)
	}
	b = append(b, '|')
	for _, err := range r.Errors {
		b = append(b, err.Error()...)
		b = append(b, 0)
	}
	b = append(b, '|')
	for _, id := range r.DeferredAcks { // each puts a timer in flight
		b = rref.AppendRRefID(b, &id)
	}
	return b, true
}

func cmpDigest(a, b digest) int {
	if a[0] != b[0] {
		if a[0] < b[0] {
			return -1
		}
		return 1
	}
	if a[1] < b[1] {
		return -1
	}
	if a[1] > b[1] {
		return 1
	}
	return 0
}
