package core

import (
	"iter"
	"math/bits"
	"math/rand/v2"
	"slices"

	"github.com/rrefkit/rref/generated/rref"
)

// idKey is a key of the core's hottest tables: an RRef or a fork id, a
// worker and a 64-bit local part.
type idKey interface {
	~struct {
		Worker rref.WorkerID
		Local  uint64
	}
}

// idMap is a hash table keyed by RRef or fork ids, written for the core's
// two hot paths: a handled control message makes about a dozen lookups,
// and an explorer copies whole tables on a clone's first write.
//
// A Go map of these padded two-field structs hashes them field by field
// through the runtime's generic path, a third of a control message's time
// in a profile; here a key is mixed with two 64-bit multiplies (idHash). A copy is
// one slice copy, where a Go map's clone walks its groups.
//
// Keys come from peers, so the mix is seeded per process (idSeed): a peer
// that does not know the seed cannot choose keys that collide. Linear
// probing; a deleted entry leaves a tombstone, so that deleting during a
// walk (all) moves nothing the walk has yet to see; tombstones go when the
// table is rebuilt. The zero value is an empty table.
type idMap[K idKey, V any] struct {
	slots []idSlot[K, V] // a power of two long, or nil
	live  int            // keys present
	taken int            // slots not free: live ones and tombstones
}

type idSlot[K idKey, V any] struct {
	key K
	// val comes before state: a zero-size value last would be padded to a
	// word (Go keeps a pointer to it inside the slot).
	val   V
	state slotState
	// hash is the low half of the key's idHash, which picks its home: kept
	// so that a probe compares keys only on a likely match, and a shift or
	// rehash need not mix each key again. It fills padding after state,
	// so a slot is no larger (see TestIDSlotSizes).
	hash uint32
}

type slotState uint8

const (
	slotFree slotState = iota
	slotLive
	slotDead   // a tombstone: deleted, still on some key's probe path
	slotMoving // live, during dropTombstones only
)

// idMapMinSlots is a table's first size: most tables of a core hold a
// handful of ids.
const idMapMinSlots = 8

// idSeed keys the mix of every idMap of the process (see idMap): drawn
// once from the runtime's random source, never shown.
var idSeed = [2]uint64{rand.Uint64() | 1, rand.Uint64()}

// idHash mixes a key into 64 bits: the high and low halves of a 128-bit
// product of its two words, each first xored with the seed, then once
// more with a fixed odd constant (wyhash's mixing step and its finish,
// which Go's runtime uses too). One round alone left some seeds' tables
// badly clustered: with one worker's ids, the seeded worker word is a
// fixed multiplier, and one with trailing zero bits (or ids that differ
// only in their high bits) fed the low bits, which pick the slot, from a
// few bits of the id. Over 300 seeds, 4096 ids a table's size apart sat
// up to 424 slots past their home (mean 45); with the finish, at most 44
// (mean at most 0.6), in sequence and in steps of eight too (see
// TestIDMapCollidingKeys).
func idHash[K idKey](k K) uint64 {
	f := rref.ForkID(k)
	hi, lo := bits.Mul64(f.Local^idSeed[0], uint64(f.Worker)^idSeed[1]^0x9e3779b97f4a7c15)
	hi, lo = bits.Mul64(hi^lo, idFinish)
	return hi ^ lo
}

// idFinish is wyhash's secret p1, an odd constant with balanced bits.
const idFinish = 0xe7037ed1a0b428db

// sameID compares two ids field by field: == on a type parameter calls
// the runtime's generic equality, which costs a call per probe.
func sameID[K idKey](a, b K) bool {
	x, y := rref.ForkID(a), rref.ForkID(b)
	return x.Local == y.Local && x.Worker == y.Worker
}

// find returns the slot holding k, or -1.
func (m *idMap[K, V]) find(k K) int {
	if m.live == 0 {
		return -1
	}
	mask := len(m.slots) - 1
	h := uint32(idHash(k))
	for i := int(h) & mask; ; i = (i + 1) & mask {
		s := &m.slots[i]
		switch {
		case s.state == slotFree:
			return -1
		case s.hash == h && s.state == slotLive && sameID(s.key, k):
			return i
		}
	}
}

func (m *idMap[K, V]) get(k K) (V, bool) {
	if i := m.find(k); i >= 0 {
		return m.slots[i].val, true
	}
	var zero V
	return zero, false
}

// at is k's value, or the zero value when k is absent.
func (m *idMap[K, V]) at(k K) V {
	v, _ := m.get(k)
	return v
}

func (m *idMap[K, V]) has(k K) bool { return m.find(k) >= 0 }

func (m *idMap[K, V]) len() int { return m.live }

// put sets k's value.
func (m *idMap[K, V]) put(k K, v V) { m.store(k, v, true) }

// add sets k's value if k is absent, and reports whether it was: one
// probe where has and put take two.
func (m *idMap[K, V]) add(k K, v V) bool { return m.store(k, v, false) }

// store sets k's value, or when k is present and replace is not set
// leaves it; it reports whether k was absent.
func (m *idMap[K, V]) store(k K, v V, replace bool) bool {
	if (m.taken+1)*4 > len(m.slots)*3 {
		m.rebuild()
	}
	mask := len(m.slots) - 1
	grave := -1 // the first tombstone on k's path: where k goes if absent
	h := uint32(idHash(k))
	for i := int(h) & mask; ; i = (i + 1) & mask {
		s := &m.slots[i]
		switch s.state {
		case slotLive:
			if s.hash == h && sameID(s.key, k) {
				if replace {
					s.val = v
				}
				return false
			}
		case slotDead:
			if grave < 0 {
				grave = i
			}
		case slotFree:
			if grave >= 0 {
				i = grave
			} else {
				m.taken++
			}
			m.slots[i] = idSlot[K, V]{key: k, state: slotLive, hash: h, val: v}
			m.live++
			return true
		}
	}
}

// del removes k, if present.
func (m *idMap[K, V]) del(k K) {
	i := m.find(k)
	if i < 0 {
		return
	}
	var zero V
	m.slots[i].val = zero // let the value go
	m.slots[i].state = slotDead
	m.live--
	if m.live == 0 && len(m.slots) <= idMapClearRatio*m.taken {
		// Every path is empty again; the clear costs the table's size,
		// paid for by the deletes that left the tombstones. A table that
		// once held many keys and now churns one keeps its tombstones
		// instead, until a put rebuilds it: a peer that grew an owner's
		// forks and then adds and deletes one at a time would otherwise
		// make every delete clear the whole table.
		clear(m.slots)
		m.taken = 0
	}
}

// idMapClearRatio is how many slots a delete that empties a table may
// clear per tombstone it clears.
const idMapClearRatio = 8

// delShifting removes k, if present, leaving no tombstone: the entries
// after it on its cluster that may move back are moved back (backward-shift
// deletion). It must not run during a walk of m, which it may make miss an
// entry; the bounded memories use it, which are never walked while they
// change, and churn for ever: a tombstone per step would fill their
// tables with dead slots to probe past and rebuild.
func (m *idMap[K, V]) delShifting(k K) {
	i := m.find(k)
	if i < 0 {
		return
	}
	mask := len(m.slots) - 1
	for j := (i + 1) & mask; m.slots[j].state != slotFree; j = (j + 1) & mask {
		// The entry at j may fill the hole at i unless its home lies
		// cyclically in (i, j]: then i is before its home, where a probe
		// for it never looks.
		home := int(m.slots[j].hash) & mask
		if (j-home)&mask < (j-i)&mask {
			continue
		}
		m.slots[i] = m.slots[j]
		i = j
	}
	m.slots[i] = idSlot[K, V]{} // k's slot, or the last one an entry left

	m.live--
	m.taken--
}

// rebuild rehashes into a table sized for the live keys, tombstones
// dropped: twice as large when live keys fill more than 3/8 of it (so
// that 3/8 of it is left to fill before the next rebuild: a full
// bounded memory deletes and adds at every step), and otherwise
// where it is (dropTombstones), since a worker's steady traffic adds and
// deletes forks for ever and must not allocate for it.
func (m *idMap[K, V]) rebuild() {
	n := max(idMapMinSlots, len(m.slots))
	if (m.live+1)*8 > n*3 {
		n *= 2
	}
	if n == len(m.slots) {
		m.dropTombstones()
		return
	}
	old := m.slots
	m.slots = make([]idSlot[K, V], n)
	mask := n - 1
	for _, s := range old {
		if s.state != slotLive {
			continue
		}
		i := int(s.hash) & mask
		for m.slots[i].state != slotFree {
			i = (i + 1) & mask
		}
		m.slots[i] = s
	}
	m.taken = m.live
}

// dropTombstones rehashes the table in place. Every live entry is first
// marked as moving and every tombstone freed; then each moving entry is
// carried to the first free or moving slot from its home, and a moving
// entry found there is carried on in turn. A placed entry is never moved
// again and the slots before it on its path are all placed ones, so every
// entry stays reachable; each step places one, so it ends.
func (m *idMap[K, V]) dropTombstones() {
	for i := range m.slots {
		switch m.slots[i].state {
		case slotLive:
			m.slots[i].state = slotMoving
		case slotDead:
			m.slots[i] = idSlot[K, V]{}
		}
	}
	mask := len(m.slots) - 1
	for i := range m.slots {
		if m.slots[i].state != slotMoving {
			continue
		}
		carried := m.slots[i]
		m.slots[i] = idSlot[K, V]{}
		for {
			j := int(carried.hash) & mask
			for m.slots[j].state == slotLive {
				j = (j + 1) & mask
			}
			carried.state = slotLive
			if m.slots[j].state == slotFree {
				m.slots[j] = carried
				break
			}
			carried, m.slots[j] = m.slots[j], carried
		}
	}
	m.taken = m.live
}

// all walks the live keys. The walker may delete keys: one deleted
// before the walk reached it is not seen, since a delete moves nothing. It
// must not put or add, which may rehash the table in place under the walk
// (the core's walks only read, or delete).
func (m *idMap[K, V]) all() iter.Seq2[K, V] {
	return func(yield func(K, V) bool) {
		for i := range m.slots {
			if s := &m.slots[i]; s.state == slotLive && !yield(s.key, s.val) {
				return
			}
		}
	}
}

// clone is an independent copy (the values themselves are copied as they
// are: pointers still point at the same records).
func (m *idMap[K, V]) clone() idMap[K, V] {
	return idMap[K, V]{slots: slices.Clone(m.slots), live: m.live, taken: m.taken}
}

// replace sets each value to f of it, in place: how a copy gets copies of
// the records its original points at.
func (m *idMap[K, V]) replace(f func(V) V) {
	for i := range m.slots {
		if s := &m.slots[i]; s.state == slotLive {
			s.val = f(s.val)
		}
	}
}

// sortedIDs lists m's keys in id order: tables are walked in a fixed order
// so outputs, state encodings and replays are deterministic.
func sortedIDs[K idKey, V any](m *idMap[K, V]) []K {
	return appendSortedIDs(make([]K, 0, m.len()), m)
}

func appendSortedIDs[K idKey, V any](dst []K, m *idMap[K, V]) []K {
	for k := range m.all() {
		dst = append(dst, k)
	}
	slices.SortFunc(dst, func(a, b K) int { return compareForks(rref.ForkID(a), rref.ForkID(b)) })
	return dst
}
