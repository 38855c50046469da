package core

// bounded remembers up to limit keys with a value, forgetting the oldest
// first: the owner's memory of freed values and deleted forks.
type bounded[K comparable, V any] struct {
	m     map[K]V
	ring  []K
	next  int
	limit int
	// forgot counts the entries forgotten to make room. Which goes first
	// depends on the order entries came in, which the state encoding
	// leaves out (it would multiply an explorer's states by the orders):
	// see Core.Forgotten.
	forgot int
}

func newBounded[K comparable, V any](limit int) bounded[K, V] {
	return bounded[K, V]{m: map[K]V{}, limit: limit}
}

// add remembers k (a key already present keeps its first value).
func (b *bounded[K, V]) add(k K, v V) {
	if _, ok := b.m[k]; ok {
		return
	}
	if len(b.ring) < b.limit {
		b.ring = append(b.ring, k)
	} else {
		delete(b.m, b.ring[b.next])
		b.forgot++
		b.ring[b.next] = k
		b.next = (b.next + 1) % b.limit
	}
	b.m[k] = v
}

func (b *bounded[K, V]) get(k K) (V, bool) {
	v, ok := b.m[k]
	return v, ok
}

func (b *bounded[K, V]) clone() bounded[K, V] {
	c := *b
	c.m = make(map[K]V, len(b.m))
	for k, v := range b.m {
		c.m[k] = v
	}
	c.ring = append([]K(nil), b.ring...)
	return c
}
