package core

import "github.com/rrefkit/rref/generated/rref"

// bounded remembers up to limit keys with a value, forgetting the oldest
// first: the owner's memory of freed values and deleted forks, and a
// worker's of cancels that came before their calls.
type bounded[K idKey, V any] struct {
	m     idMap[K, V]
	ring  []K
	next  int
	limit int
	// forgot counts the entries forgotten to make room. Which goes first
	// depends on the order entries came in, which the state encoding
	// leaves out (it would multiply an explorer's states by the orders):
	// see Core.Forgotten.
	forgot int
	// high[w % boundedBuckets] is the largest local part ever added with a
	// worker w of that bucket: a key above it was never added, and get
	// answers without probing. Ids are minted from counters, so the key a
	// worker asks about next (its newest fork) is above every one it
	// deleted, and a lookup that would miss the cache in a full memory (tables
	// of megabytes) costs one line of this array. Only raised, never
	// lowered when keys are forgotten: a bound, not a count.
	high [boundedBuckets]uint64
}

// boundedBuckets is how many workers have a bound of their own before
// they share one (a shared bound is the larger: lookups probe more, answers
// stay exact). 64 words: a group's workers, in eight cache lines.
const boundedBuckets = 64

// bucket is k's bound in high.
func bucket[K idKey](k K) (int, uint64) {
	f := rref.ForkID(k)
	return int(f.Worker % boundedBuckets), f.Local
}

func newBounded[K idKey, V any](limit int) bounded[K, V] {
	return bounded[K, V]{limit: limit}
}

// add remembers k (a key already present keeps its first value).
func (b *bounded[K, V]) add(k K, v V) {
	if !b.m.add(k, v) {
		return
	}
	if i, local := bucket(k); local > b.high[i] {
		b.high[i] = local
	}
	if len(b.ring) < b.limit {
		b.ring = append(b.ring, k)
		return
	}
	b.m.delShifting(b.ring[b.next])
	b.forgot++
	b.ring[b.next] = k
	b.next = (b.next + 1) % b.limit
}

func (b *bounded[K, V]) get(k K) (V, bool) {
	if i, local := bucket(k); local > b.high[i] {
		var zero V
		return zero, false
	}
	return b.m.get(k)
}

func (b *bounded[K, V]) clone() bounded[K, V] {
	c := *b
	c.m = b.m.clone()
	c.ring = append([]K(nil), b.ring...)
	return c
}
