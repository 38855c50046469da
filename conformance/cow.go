package conformance

import (
	"maps"
	"slices"

	"github.com/rrefkit/rref/explore"
)

// cowMap is a map shared with clones until written: read m, write with set
// and del. The clone that shares it calls share; its first write copies
// the map. Values are never written in place (a change stores a new one).
type cowMap[K comparable, V any] struct {
	m      map[K]V
	shared bool
}

func (c *cowMap[K, V]) share() { c.shared = true }

func (c *cowMap[K, V]) set(k K, v V) {
	c.own()
	c.m[k] = v
}

func (c *cowMap[K, V]) del(k K) {
	if _, ok := c.m[k]; ok {
		c.own()
		delete(c.m, k)
	}
}

// own makes m this value's own, to write.
func (c *cowMap[K, V]) own() {
	if c.shared || c.m == nil {
		c.m, c.shared = maps.Clone(c.m), false
		if c.m == nil {
			c.m = map[K]V{}
		}
	}
}

// table is one of the world's maps (the program's or the monitor's) that
// records its own footprint (commute.go): every read and write of an entry
// goes through a method that names the step's footprint, so that no code
// can read or write the map and forget to say so, which would let the
// search take two steps for independent that are not. untracked is the
// only way around it, for the code that runs outside a step's footprint
// (the state key, the end checks, the sums recomputed in tests) or inside
// a step that touches everything (a crash); TestTablesAreTracked holds
// every use of it to that list.
type table[K comparable, V any] struct {
	raw cowMap[K, V]
	id  int            // the table's locations (commute.go)
	loc func(K) uint64 // the key's location in it
}

func newTable[K comparable, V any](id int, loc func(K) uint64) table[K, V] {
	return table[K, V]{id: id, loc: loc}
}

func (t *table[K, V]) at(k K) uint64 { return explore.Location(t.id, t.loc(k)) }

// get reads k's entry.
func (t *table[K, V]) get(fp *explore.Footprint, k K) V {
	fp.Read(t.at(k))
	return t.raw.m[k]
}

// lookup reads k's entry and whether there is one.
func (t *table[K, V]) lookup(fp *explore.Footprint, k K) (V, bool) {
	fp.Read(t.at(k))
	v, ok := t.raw.m[k]
	return v, ok
}

// put writes k's entry.
func (t *table[K, V]) put(fp *explore.Footprint, k K, v V) {
	fp.Write(t.at(k))
	t.raw.set(k, v)
}

// settle writes k's entry with the value every write of it writes (a fact
// that becomes true, an owner that never changes): Footprint.Set, which
// commutes with another such write.
func (t *table[K, V]) settle(fp *explore.Footprint, k K, v V) {
	fp.Set(t.at(k))
	t.raw.set(k, v)
}

// grow adds k's entry unless it has one, for a set that only grows, where
// every write of k stores the same value: Footprint.Set, as two such
// writes commute whichever comes first. It reports whether it added.
func (t *table[K, V]) grow(fp *explore.Footprint, k K, v V) bool {
	fp.Set(t.at(k))
	if _, ok := t.raw.m[k]; ok {
		return false
	}
	t.raw.set(k, v)
	return true
}

// remove deletes k's entry.
func (t *table[K, V]) remove(fp *explore.Footprint, k K) {
	fp.Write(t.at(k))
	t.raw.del(k)
}

// all reads the whole table, to range over.
func (t *table[K, V]) all(fp *explore.Footprint) map[K]V {
	fp.ReadTable(t.id)
	return t.raw.m
}

// size reads the whole table's size.
func (t *table[K, V]) size(fp *explore.Footprint) int {
	fp.ReadTable(t.id)
	return len(t.raw.m)
}

// untracked is the map without a footprint: only for the code
// TestTablesAreTracked allows.
func (t *table[K, V]) untracked() map[K]V { return t.raw.m }

func (t *table[K, V]) share() { t.raw.share() }

// growList adds e to k's list in t, for a list every reader takes as a
// set: Footprint.Set, as two additions commute. The list is appended to a
// copy, since clones share it.
func growList[K comparable, E any](fp *explore.Footprint, t *table[K, []E], k K, e E) {
	fp.Set(t.at(k))
	t.raw.set(k, append(slices.Clone(t.raw.m[k]), e))
}
