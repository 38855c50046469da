//go:build rrefmutants

package conformance

import "github.com/rrefkit/rref/runtime/core"

// activeMutant is the bug seeded into the core now: answers about the
// core's behaviour are cached per mutant.
func activeMutant() int { return core.ActiveMutant() }
