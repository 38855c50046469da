package conformance

import "maps"

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
