package core

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
}

func newBounded[K idKey, V any](limit int) bounded[K, V] {
	return bounded[K, V]{limit: limit}
}

// add remembers k (a key already present keeps its first value).
func (b *bounded[K, V]) add(k K, v V) {
	if !b.m.add(k, v) {
		return
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

func (b *bounded[K, V]) get(k K) (V, bool) { return b.m.get(k) }

func (b *bounded[K, V]) clone() bounded[K, V] {
	c := *b
	c.m = b.m.clone()
	c.ring = append([]K(nil), b.ring...)
	return c
}
