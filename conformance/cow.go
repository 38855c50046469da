package conformance

import "maps"

// cowMap is a map shared with clones until written: read m, write with set.
// The clone that shares it calls share; its first set copies the map.
type cowMap[K comparable, V any] struct {
	m      map[K]V
	shared bool
}

func (c *cowMap[K, V]) share() { c.shared = true }

func (c *cowMap[K, V]) set(k K, v V) {
	if c.shared || c.m == nil {
		c.m, c.shared = maps.Clone(c.m), false
		if c.m == nil {
			c.m = map[K]V{}
		}
	}
	c.m[k] = v
}
