package conformance

import (
	"encoding/binary"
	"strconv"

	"github.com/rrefkit/rref/explore"
)

// The program's state and the monitor are keyed by sums: each fact the
// state key covers (a handle, a fetch, a travelling handle; a fork answered,
// refused or exempt, a delete count, a value exempt, the crash) adds the
// digest of its encoding, tagged by kind, to its owner's sum when it
// becomes true and takes it away when it stops being so. Like the messages
// in flight, a sum does not depend on the order facts were added in, and a
// step that changes one fact pays for one digest, not for encoding and
// sorting every fact again. recomputeSum is the reference the clone check
// compares the sums against.

// The kinds of facts, the first byte of each encoding (counters.go has
// more: u, l, k, o, n and m).
const (
	factHandle     = 'h'
	factFetch      = 'f'
	factTravel     = 't'
	factAnswered   = 'a'
	factRefused    = 'r'
	factExempt     = 'x'
	factDeletes    = 'd'
	factExemptRRef = 'v'
	factCrashed    = 'c'
)

func (d digest) sub(e digest) digest { return digest{d[0] - e[0], d[1] - e[1]} }

// factRoom is the stack room a fact is encoded in; a longer one (a long
// handle name or fetched value) grows onto the heap.
const factRoom = 64

func handleFact(k handleKey, h *progHandle) digest {
	b := make([]byte, 0, factRoom)
	b = append(b, factHandle)
	b = appendHandleKey(b, k)
	b = binary.AppendUvarint(b, uint64(h.id))
	b = strconv.AppendBool(b, h.released)
	b = strconv.AppendBool(b, h.timedOut)
	return digestOf(b)
}

func fetchFact(k handleKey, f *fetchState) digest {
	b := make([]byte, 0, factRoom)
	b = append(b, factFetch)
	b = appendHandleKey(b, k)
	b = strconv.AppendBool(b, f.done)
	b = binary.AppendUvarint(b, uint64(f.err))
	b = append(b, f.value...) // last: nothing follows it to run into
	return digestOf(b)
}

// appendHandleKey is delimited: "c1" of worker 2 and "c" of worker 12 must
// not encode alike.
func appendHandleKey(b []byte, k handleKey) []byte {
	b = binary.AppendUvarint(b, uint64(k.w))
	b = binary.AppendUvarint(b, uint64(len(k.name)))
	return append(b, k.name...)
}

func forkFact(kind byte, f ForkID) digest {
	b := make([]byte, 0, factRoom)
	b = append(b, kind)
	b = binary.AppendUvarint(b, uint64(f.Worker))
	b = binary.AppendUvarint(b, f.Local)
	return digestOf(b)
}

func deletesFact(f ForkID, n int) digest {
	b := make([]byte, 0, factRoom)
	b = append(b, factDeletes)
	b = binary.AppendUvarint(b, uint64(f.Worker))
	b = binary.AppendUvarint(b, f.Local)
	b = binary.AppendUvarint(b, uint64(n))
	return digestOf(b)
}

// Changes to the program's state that its sum covers.

func (p *runState) setHandle(fp *explore.Footprint, k handleKey, h *progHandle) {
	if old := p.handles.get(fp, k); old != nil {
		p.sum = p.sum.sub(handleFact(k, old))
	}
	p.handles.put(fp, k, h)
	p.sum = p.sum.add(handleFact(k, h))
}

func (p *runState) setFetch(fp *explore.Footprint, k handleKey, f *fetchState) {
	if old := p.fetches.get(fp, k); old != nil {
		p.sum = p.sum.sub(fetchFact(k, old))
	}
	p.fetches.put(fp, k, f)
	p.sum = p.sum.add(fetchFact(k, f))
}

func (p *runState) addTravel(fp *explore.Footprint, f ForkID, t travelling) {
	if _, ok := p.travel.lookup(fp, f); !ok {
		p.sum = p.sum.add(forkFact(factTravel, f))
	}
	p.travel.put(fp, f, t)
}

func (p *runState) delTravel(fp *explore.Footprint, f ForkID) {
	if _, ok := p.travel.lookup(fp, f); ok {
		p.sum = p.sum.sub(forkFact(factTravel, f))
		p.travel.remove(fp, f)
	}
}

// recomputeSum is the sum of every fact, from the maps themselves.
func (p *runState) recomputeSum() digest {
	var sum digest
	for k, h := range p.handles.untracked() {
		sum = sum.add(handleFact(k, h))
	}
	for k, f := range p.fetches.untracked() {
		sum = sum.add(fetchFact(k, f))
	}
	for f := range p.travel.untracked() {
		sum = sum.add(forkFact(factTravel, f))
	}
	return sum
}

// Changes to the monitor that its sum covers. The sets only grow.

// mark makes f a member of set: Footprint.Set, as two marks commute.
func (m *monitor) mark(fp *explore.Footprint, set *table[ForkID, bool], kind byte, f ForkID) {
	if set.grow(fp, f, true) {
		m.sum = m.sum.add(forkFact(kind, f))
	}
}

func (m *monitor) markExemptRRef(fp *explore.Footprint, id RRefID) {
	if m.exemptRRef.grow(fp, id, true) {
		m.sum = m.sum.add(forkFact(factExemptRRef, ForkID(id)))
	}
}

func (m *monitor) countDelete(fp *explore.Footprint, f ForkID) int {
	n := m.deletes.get(fp, f)
	if n > 0 {
		m.sum = m.sum.sub(deletesFact(f, n))
	}
	m.deletes.put(fp, f, n+1)
	m.sum = m.sum.add(deletesFact(f, n+1))
	return n + 1
}

func (m *monitor) markCrashed() {
	if !m.crashed {
		m.crashed = true
		m.sum = m.sum.add(forkFact(factCrashed, ForkID{}))
	}
}

func (m *monitor) recomputeSum() digest {
	var sum digest
	for _, set := range []struct {
		kind byte
		m    map[ForkID]bool
	}{{factAnswered, m.answered.untracked()}, {factRefused, m.refused.untracked()}, {factExempt, m.exempt.untracked()}} {
		for f, ok := range set.m {
			if ok {
				sum = sum.add(forkFact(set.kind, f))
			}
		}
	}
	for f, n := range m.deletes.untracked() {
		sum = sum.add(deletesFact(f, n))
	}
	for id, ok := range m.exemptRRef.untracked() {
		if ok {
			sum = sum.add(forkFact(factExemptRRef, ForkID(id)))
		}
	}
	if m.crashed {
		sum = sum.add(forkFact(factCrashed, ForkID{}))
	}
	return sum
}
