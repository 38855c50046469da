package explore

import (
	"slices"
	"sync"
	"sync/atomic"
)

// memoShards splits the memo so that parallel workers rarely share a lock;
// a power of two, to pick a shard by mask.
const memoShards = 64

// memo maps each state entered to what its exploration found: once done,
// the number of complete schedules from it and the length of the longest.
// Both are functions of the state alone (in a graph with no cycle), so
// workers that explore one state twice store the same numbers. Its size is
// the number of distinct states entered, which the state bound counts.
//
// Each shard is an open-addressing table of its own, not a Go map: its
// keys are fingerprints, already uniform, so they index the table as they
// are instead of being hashed again, and an entry holds everything about
// its state, the sleep set it left included, in one cache line.
type memo struct {
	shards [memoShards]memoShard
	size   atomic.Int64
}

type memoShard struct {
	sync.Mutex
	slots []memoSlot // a power of two long; a zero key marks a free slot
	used  int
	// events holds the sleep sets states left (memoSlot.asleepOff), all of
	// a shard's in one slice rather than one slice a state.
	events []Event
}

// memoSlot is one state's entry, 40 bytes.
type memoSlot struct {
	key       stateKey
	entry     memoEntry
	asleepOff uint32 // the events its explorations left asleep, in events
	asleepN   uint32
}

type memoEntry struct {
	schedules float64
	height    int32 // steps in the longest schedule from the state
	done      bool  // explored; otherwise only entered, by some worker
}

// memoStartSlots is a shard's first table: small, as most searches are.
const memoStartSlots = 8

// memoNoKey stands in for the one key a free slot cannot hold (zero).
var memoNoKey = stateKey{1, 0}

func newMemo() *memo { return &memo{} }

// find returns k's slot, or the free slot where it belongs, growing the
// table first so that it stays at most three quarters full.
func (s *memoShard) find(k stateKey) *memoSlot {
	if k == (stateKey{}) {
		k = memoNoKey
	}
	if (s.used+1)*4 > len(s.slots)*3 {
		s.grow()
	}
	mask := uint64(len(s.slots) - 1)
	// The shard was chosen by k[0]'s low bits: index by the other lane.
	for i := k[1] & mask; ; i = (i + 1) & mask {
		if sl := &s.slots[i]; sl.key == k || sl.key == (stateKey{}) {
			return sl
		}
	}
}

func (s *memoShard) grow() {
	old := s.slots
	s.slots = make([]memoSlot, max(memoStartSlots, 2*len(old)))
	mask := uint64(len(s.slots) - 1)
	for _, sl := range old {
		if sl.key == (stateKey{}) {
			continue
		}
		i := sl.key[1] & mask
		for s.slots[i].key != (stateKey{}) {
			i = (i + 1) & mask
		}
		s.slots[i] = sl
	}
}

func (m *memo) shard(k stateKey) *memoShard { return &m.shards[k[0]&(memoShards-1)] }

// enter records that k is being explored; the result is its entry if it
// was explored already, and then, when withAsleep, the events it left
// asleep (appended to asleep[:0], the caller's buffer).
func (m *memo) enter(k stateKey, withAsleep bool, asleep []Event) (memoEntry, bool, []Event) {
	s := m.shard(k)
	s.Lock()
	sl := s.find(k)
	if sl.key == (stateKey{}) {
		sl.key = keyOrStandIn(k)
		s.used++
		m.size.Add(1)
	}
	e := sl.entry
	asleep = asleep[:0]
	if e.done && withAsleep {
		asleep = append(asleep, s.events[sl.asleepOff:sl.asleepOff+sl.asleepN]...)
	}
	s.Unlock()
	return e, e.done, asleep
}

func keyOrStandIn(k stateKey) stateKey {
	if k == (stateKey{}) {
		return memoNoKey
	}
	return k
}

// put records k as explored, with the events it left asleep. A state
// explored twice (by two workers, or again with a smaller sleep set) left
// asleep only what both explorations did: the sets intersect.
func (m *memo) put(k stateKey, e memoEntry, asleep []Event) {
	s := m.shard(k)
	s.Lock()
	defer s.Unlock()
	sl := s.find(k)
	if sl.key == (stateKey{}) { // put without enter: a state with no step
		sl.key = keyOrStandIn(k)
		s.used++
		m.size.Add(1)
	}
	e.done = true
	if !sl.entry.done {
		sl.entry = e
		sl.asleepOff, sl.asleepN = uint32(len(s.events)), uint32(len(asleep))
		s.events = append(s.events, asleep...)
		return
	}
	e.height = max(e.height, sl.entry.height)
	sl.entry = e
	// What both left asleep, written over the old set, which it cannot outgrow.
	prev := s.events[sl.asleepOff : sl.asleepOff+sl.asleepN]
	kept := prev[:0]
	for _, ev := range prev {
		if slices.Contains(asleep, ev) {
			kept = append(kept, ev)
		}
	}
	sl.asleepN = uint32(len(kept))
}
