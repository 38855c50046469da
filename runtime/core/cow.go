package core

import (
	"maps"
	"math/rand/v2"
	"slices"
)

// A core's tables are copied on write: Clone shares them all with the copy,
// and each core copies a table the first time it writes it after a Clone.
// An explorer clones a core for every step that changes it, and a step
// writes one table or three of eleven, so the rest are never copied.
//
// The rule that keeps it sound: a method that may change a table, or a
// record in it, reaches the table through its accessor below (ownersW,
// usersW, ...) before taking any record out of it, and reads the field
// directly only where it changes nothing. A record taken through the field
// and written after a copy would write the table the clone shares.
// Handle records are never written once in the table (a change replaces
// the record), so the handles table is copied without its records.
// conformance's TestClonesShareNothingWritten explores the corpus with
// every state re-encoded after its siblings ran, and fails on any such
// write.

// table is one bit of Core.shared: a table this core shares with a clone.
type table uint16

const (
	tabOwners table = 1 << iota
	tabUsers
	tabPins
	tabHandles
	tabFetches
	tabCalls
	tabDead
	tabTombs
	tabGoneForks
	tabEarlyCancels
	tabAwaiting
	tabCharged
	tabIDs    // the id generator: 320 bytes most steps never draw from
	allTables = 1<<iota - 1
)

// segments are the tables with an encoding of their own (AppendState) and
// so a digest of their own (StateDigest), in
// the order they are encoded: the first bits of table, awaiting and charged
// excepted (awaiting is encoded with owners, charged is what the owners'
// charges sum to).
const segments = 10

// digestedWith is the cached digest each table is part of.
func digestedWith(t table) table {
	if t == tabAwaiting {
		return tabOwners
	}
	return t
}

// writes drops t's cached digest (the caller is about to change it),
// and reports whether t is shared, making it this core's own from now on:
// the caller copies it.
func (c *Core) writes(t table) bool {
	c.digested &^= digestedWith(t)
	if c.shared&t == 0 {
		return false
	}
	c.shared &^= t
	return true
}

// ownersW is the owners table, to change: its records and their forks,
// waiting fetches and charges copied first if a clone shares them.
func (c *Core) ownersW() *idMap[RRefID, *ownerRec] {
	if c.writes(tabOwners) {
		c.owners = c.owners.clone()
		c.owners.replace(func(o *ownerRec) *ownerRec {
			oo := *o
			oo.forks = o.forks.clone()
			oo.waiting = slices.Clone(o.waiting)
			oo.charges = slices.Clone(o.charges)
			return &oo
		})
	}
	return &c.owners
}

// usersW is the users table, to change, its records copied first if a
// clone shares them. Runs waiting for several forks stay shared among
// their copied users, as they were among the originals.
func (c *Core) usersW() *idMap[ForkID, *userRec] {
	if c.writes(tabUsers) {
		var runs map[*pendingRun]*pendingRun // made when a user has runs: most have none
		c.users = c.users.clone()
		c.users.replace(func(u *userRec) *userRec {
			uu := *u
			uu.runs = nil
			for _, r := range u.runs {
				n, ok := runs[r]
				if !ok {
					if runs == nil {
						runs = map[*pendingRun]*pendingRun{}
					}
					copied := *r
					n = &copied
					runs[r] = n
				}
				uu.runs = append(uu.runs, n)
			}
			return &uu
		})
	}
	return &c.users
}

// pinsW is the pins table, to change.
func (c *Core) pinsW() *idMap[ForkID, *pinRec] {
	if c.writes(tabPins) {
		c.pins = c.pins.clone()
		c.pins.replace(func(p *pinRec) *pinRec {
			pp := *p
			return &pp
		})
	}
	return &c.pins
}

// flatW is a table of values (or of records never written once in it),
// to change: copied, without its values, first if a clone shares it.
func flatW[K comparable, V any](c *Core, t table, m *map[K]V) map[K]V {
	if c.writes(t) {
		*m = maps.Clone(*m)
	}
	return *m
}

// handlesW is the handles table, to change; its records are immutable.
func (c *Core) handlesW() map[HandleID]*handleRec { return flatW(c, tabHandles, &c.handles) }
func (c *Core) fetchesW() map[uint64]fetchRec     { return flatW(c, tabFetches, &c.fetches) }
func (c *Core) callsW() map[uint64]WorkerID       { return flatW(c, tabCalls, &c.calls) }
func (c *Core) awaitingW() *idMap[RRefID, uint64] {
	if c.writes(tabAwaiting) {
		c.awaiting = c.awaiting.clone()
	}
	return &c.awaiting
}
func (c *Core) chargedW() map[WorkerID]int { return flatW(c, tabCharged, &c.charged) }

// boundedW is a bounded memory, to change: copied first if a clone shares it.
func boundedW[K idKey, V any](c *Core, t table, b *bounded[K, V]) *bounded[K, V] {
	if c.writes(t) {
		*b = b.clone()
	}
	return b
}

func (c *Core) tombsW() *bounded[RRefID, tombstone] { return boundedW(c, tabTombs, &c.tombs) }

func (c *Core) goneForksW() *bounded[ForkID, struct{}] {
	return boundedW(c, tabGoneForks, &c.goneForks)
}

func (c *Core) idsW() *rand.ChaCha8 {
	if c.writes(tabIDs) {
		ids := *c.ids
		c.ids = &ids
	}
	return c.ids
}

func (c *Core) earlyCancelsW() *bounded[callKey, bool] {
	return boundedW(c, tabEarlyCancels, &c.earlyCancels)
}
