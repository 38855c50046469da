package core

import (
	"bytes"
	"maps"
	"math/rand/v2"
	"testing"
	"unsafe"

	"pgregory.net/rapid"
)

// TestIDMapAgainstAGoMap drives an idMap and a Go map with the same puts,
// deletes, gets, clones and walks (deleting and adding as they go), over
// keys drawn from a few workers and a small range of local ids so that
// they collide and probe, and requires the same answers.
func TestIDMapAgainstAGoMap(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var m idMap[ForkID, int]
		model := map[ForkID]int{}
		var clones []idMap[ForkID, int]
		var cloneModels []map[ForkID]int
		key := rapid.Custom(func(t *rapid.T) ForkID {
			return ForkID{Worker: WorkerID(rapid.IntRange(0, 3).Draw(t, "w")), Local: rapid.Uint64Range(0, 40).Draw(t, "l")}
		})
		check := func(what string) {
			if m.len() != len(model) {
				t.Fatalf("%s: len %d, want %d", what, m.len(), len(model))
			}
			seen := map[ForkID]int{}
			for k, v := range m.all() {
				if _, twice := seen[k]; twice {
					t.Fatalf("%s: %v walked twice", what, k)
				}
				seen[k] = v
			}
			if !maps.Equal(seen, model) {
				t.Fatalf("%s: walked %v, want %v", what, seen, model)
			}
		}
		for range rapid.IntRange(1, 300).Draw(t, "ops") {
			switch rapid.IntRange(0, 6).Draw(t, "op") {
			case 0:
				k, v := key.Draw(t, "k"), rapid.Int().Draw(t, "v")
				m.put(k, v)
				model[k] = v
			case 1: // add: sets only an absent key, and says which it was
				k, v := key.Draw(t, "k"), rapid.Int().Draw(t, "v")
				_, present := model[k]
				if added := m.add(k, v); added == present {
					t.Fatalf("add %v: added %v, but present %v", k, added, present)
				}
				if !present {
					model[k] = v
				}
			case 2:
				k := key.Draw(t, "k")
				if rapid.Bool().Draw(t, "shifting") {
					m.delShifting(k)
				} else {
					m.del(k)
				}
				delete(model, k)
			case 3:
				k := key.Draw(t, "k")
				v, ok := m.get(k)
				mv, mok := model[k]
				if v != mv || ok != mok || m.has(k) != mok || m.at(k) != mv {
					t.Fatalf("get %v: %d %v, want %d %v", k, v, ok, mv, mok)
				}
			case 4:
				clones = append(clones, m.clone())
				cloneModels = append(cloneModels, maps.Clone(model))
			case 5: // a walk that deletes what it meets, one in two: every key met once
				before := maps.Clone(model)
				met := map[ForkID]int{}
				n := 0
				for k := range m.all() {
					met[k]++
					if n%2 == 0 {
						m.del(k)
						delete(model, k)
					}
					n++
				}
				for k := range before {
					if met[k] != 1 {
						t.Fatalf("a walk deleting what it met met %v %d times", k, met[k])
					}
				}
			case 6: // a walk that deletes keys ahead of it: none is met after, the rest once
				before := maps.Clone(model)
				gone := map[ForkID]bool{}
				met := map[ForkID]int{}
				for k := range m.all() {
					if gone[k] {
						t.Fatalf("walk met %v after deleting it", k)
					}
					met[k]++
					for j := range 3 {
						o := ForkID{Worker: k.Worker, Local: k.Local + uint64(j) + 1}
						if _, ok := model[o]; ok && met[o] == 0 {
							m.del(o)
							delete(model, o)
							gone[o] = true
						}
					}
				}
				for k := range before {
					if !gone[k] && met[k] != 1 {
						t.Fatalf("%v, never deleted, met %d times", k, met[k])
					}
				}
			}
			check("after an op")
		}
		for i := range clones {
			m, model = clones[i], cloneModels[i]
			check("a clone, after its original changed")
		}
	})
}

// TestIDMapCollidingKeys: keys that share every bit the table indexes by
// before mixing (one worker, locals a table's size apart) still spread,
// and a table refilled after a million deletes stays small.
func TestIDMapCollidingKeys(t *testing.T) {
	// Locals a table's size apart, in sequence (a worker numbers its ids
	// so), and in steps of a power of two: each in a table and in a full
	// bounded memory, which churns at its largest load.
	for _, tc := range []struct {
		name  string
		local func(i uint64) uint64
	}{
		{"apart", func(i uint64) uint64 { return i << 32 }},
		{"in sequence", func(i uint64) uint64 { return i }},
		{"in steps of eight", func(i uint64) uint64 { return i << 3 }},
	} {
		var m idMap[RRefID, int]
		for i := range uint64(4096) {
			m.put(RRefID{Worker: 1, Local: tc.local(i)}, int(i))
		}
		b := newBounded[RRefID, int](4096)
		for i := range uint64(64 * 4096) {
			b.add(RRefID{Worker: 2, Local: tc.local(i)}, int(i))
		}
		for _, m := range []*idMap[RRefID, int]{&m, &b.m} {
			mask := len(m.slots) - 1
			longest, total := 0, 0
			for k := range m.all() {
				home := int(idHash(k)) & mask
				probe := 0
				for i := home; m.slots[i].key != k; i = (i + 1) & mask {
					probe++
				}
				longest = max(longest, probe)
				total += probe
			}
			if mean := float64(total) / float64(m.len()); longest > 64 || mean > 2 {
				t.Errorf("%s: a key sits %d slots past its home in a table of %d (mean %.1f)", tc.name, longest, len(m.slots), mean)
			}
		}
	}
	var churn idMap[ForkID, bool]
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 1_000_000 {
		k := ForkID{Worker: WorkerID(rng.Uint32()), Local: rng.Uint64()}
		churn.put(k, true)
		if i%2 == 1 || churn.len() > 10 {
			for k := range churn.all() {
				churn.del(k)
				break
			}
		}
	}
	if len(churn.slots) > 64 {
		t.Errorf("a table of at most 11 keys grew to %d slots under churn", len(churn.slots))
	}
}

// TestIDMapChurnAfterAPeakClearsNothing: a peer that grows an owner's
// forks to a peak, deletes them all, and then adds and deletes one fork at
// a time must not make each delete clear the whole table (every delete
// empties it): the tombstones stay, and the table is rebuilt only once
// they fill it, each slot's clear paid for by the deletes before.
func TestIDMapChurnAfterAPeakClearsNothing(t *testing.T) {
	var m idMap[ForkID, int]
	const peak = 1 << 14
	for i := range uint64(peak) {
		m.put(ForkID{Worker: 1, Local: i}, 0)
	}
	for i := range uint64(peak) {
		m.del(ForkID{Worker: 1, Local: i})
	}
	size := len(m.slots)
	clears := 0
	for i := range uint64(4 * peak) {
		k := ForkID{Worker: 2, Local: i}
		m.put(k, 1)
		taken := m.taken
		m.del(k)
		if m.taken == 0 && taken*idMapClearRatio < size {
			clears++
		}
		if m.len() != 0 || m.has(k) {
			t.Fatalf("step %d: %v still there", i, k)
		}
	}
	if clears > 0 {
		t.Errorf("%d deletes cleared a table of %d slots holding few tombstones", clears, size)
	}
}

// TestIDMapZeroKeyAndEmpty: the zero id is a key like any other, and an
// empty table answers without slots.
func TestIDMapZeroKeyAndEmpty(t *testing.T) {
	var m idMap[ForkID, string]
	if _, ok := m.get(ForkID{}); ok || m.len() != 0 {
		t.Fatal("an empty table has a key")
	}
	m.del(ForkID{})
	m.put(ForkID{}, "zero")
	if v, ok := m.get(ForkID{}); !ok || v != "zero" {
		t.Fatalf("zero key: %q %v", v, ok)
	}
	m.del(ForkID{})
	if m.has(ForkID{}) || m.len() != 0 || m.taken != 0 {
		t.Fatalf("after delete: has %v len %d taken %d", m.has(ForkID{}), m.len(), m.taken)
	}
}

func BenchmarkIDMapLookup(b *testing.B) {
	const n = 64
	keys := make([]ForkID, n)
	var m idMap[ForkID, *userRec]
	gm := map[ForkID]*userRec{}
	for i := range keys {
		keys[i] = ForkID{Worker: WorkerID(i%3 + 1), Local: rand.Uint64()}
		m.put(keys[i], &userRec{})
		gm[keys[i]] = &userRec{}
	}
	b.Run("idMap", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			if _, ok := m.get(keys[i%n]); !ok {
				b.Fatal("missing")
			}
			i++
		}
	})
	b.Run("gomap", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			if _, ok := gm[keys[i%n]]; !ok {
				b.Fatal("missing")
			}
			i++
		}
	})
	b.Run("idMap-clone", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = m.clone()
		}
	})
	b.Run("gomap-clone", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = maps.Clone(gm)
		}
	})
}

// TestIDMapShiftingDeletesLeaveNoTombstone: a table churned by shifting
// deletes alone, over keys that share their homes, holds no tombstone and
// answers as a Go map does.
func TestIDMapShiftingDeletesLeaveNoTombstone(t *testing.T) {
	var m idMap[ForkID, int]
	model := map[ForkID]int{}
	rng := rand.New(rand.NewPCG(5, 6))
	for i := range 200_000 {
		k := ForkID{Worker: WorkerID(rng.IntN(2)), Local: uint64(rng.IntN(300))}
		if rng.IntN(2) == 0 {
			m.put(k, i)
			model[k] = i
		} else {
			m.delShifting(k)
			delete(model, k)
		}
	}
	if m.taken != m.live || m.live != len(model) {
		t.Fatalf("taken %d, live %d, want both %d: a shifting delete left a tombstone", m.taken, m.live, len(model))
	}
	for _, s := range m.slots {
		if s.state == slotDead {
			t.Fatal("a tombstone in a table only shifting deletes changed")
		}
	}
	for k, v := range model {
		if got, ok := m.get(k); !ok || got != v {
			t.Fatalf("%v: %d %v, want %d", k, got, ok, v)
		}
	}
	for k := range m.all() {
		if _, ok := model[k]; !ok {
			t.Fatalf("%v still in the table", k)
		}
	}
}

// TestIDMapChurnAtAFixedSize: a table that holds a thousand keys while
// one is deleted and another added at every step (the owner's memory of
// deleted forks, full) is rebuilt where it is, without allocating, and
// keeps every key it should.
func TestIDMapChurnAtAFixedSize(t *testing.T) {
	const size = 1000
	var m idMap[ForkID, uint64]
	model := map[ForkID]uint64{}
	var ring []ForkID
	rng := rand.New(rand.NewPCG(3, 4))
	add := func() {
		k := ForkID{Worker: WorkerID(rng.IntN(4)), Local: rng.Uint64()}
		m.put(k, k.Local)
		model[k] = k.Local
		ring = append(ring, k)
	}
	for range size {
		add()
	}
	step := func() {
		m.del(ring[0])
		delete(model, ring[0])
		ring = ring[1:]
		add()
	}
	for range 4 * size { // the table finds its size under churn
		step()
	}
	slots := len(m.slots)
	allocs := testing.AllocsPerRun(20_000, func() {
		m.del(ring[0])
		ring = append(ring[:0], ring[1:]...)
		k := ForkID{Worker: WorkerID(rng.IntN(4)), Local: rng.Uint64()}
		m.put(k, k.Local)
		ring = append(ring, k)
	})
	if allocs != 0 || len(m.slots) != slots {
		t.Errorf("churn at a fixed size: %.2f allocations a step, table %d slots from %d", allocs, len(m.slots), slots)
	}
	// The same churn against a model.
	clear(model)
	for _, k := range ring {
		model[k] = k.Local
	}
	for range 50_000 {
		step()
	}
	if m.len() != len(model) || m.taken > len(m.slots)*3/4 {
		t.Fatalf("len %d taken %d of %d, want len %d", m.len(), m.taken, len(m.slots), len(model))
	}
	for k, v := range model {
		if got, ok := m.get(k); !ok || got != v {
			t.Fatalf("%v: %d %v, want %d", k, got, ok, v)
		}
	}
	for k := range m.all() {
		if _, ok := model[k]; !ok {
			t.Fatalf("%v walked, deleted long ago", k)
		}
	}
}

// TestFullMemoriesAreCopiedOnWrite: the bounded memories, full, delete by
// shifting entries within their table; a clone that churns its memories
// must leave its original's as they were, and the original's churn its
// clones' (the explorer's corpus never fills a memory of the default size).
func TestFullMemoriesAreCopiedOnWrite(t *testing.T) {
	c := New(1, WithTombstones(3))
	churn := func(c *Core, from uint64) {
		for i := range uint64(5) {
			c.goneForksW().add(ForkID{Worker: 2, Local: from + i}, struct{}{})
			c.tombsW().add(RRefID{Worker: 2, Local: from + i}, tombstone{kind: ErrorKind(1 + i%2)})
		}
	}
	churn(c, 0)
	for round := range uint64(50) {
		before := c.AppendState(nil)
		d := c.Clone()
		churn(d, 100+10*round)
		if !bytes.Equal(c.AppendState(nil), before) {
			t.Fatalf("round %d: a clone's churn changed its original", round)
		}
		cloned := d.AppendState(nil)
		churn(c, 1000+10*round)
		if !bytes.Equal(d.AppendState(nil), cloned) {
			t.Fatalf("round %d: the original's churn changed its clone", round)
		}
	}
}

// TestIDSlotSizes holds the slots of the core's tables to the size they had
// before each kept its key's hash: the hash fills padding, and a value
// placed last (zero-size ones pad to a word there) would grow them.
func TestIDSlotSizes(t *testing.T) {
	for _, c := range []struct {
		what      string
		got, want uintptr
	}{
		{"no value (deleted forks)", unsafe.Sizeof(idSlot[ForkID, struct{}]{}), 24},
		{"a small value (tombstones)", unsafe.Sizeof(idSlot[RRefID, tombstone]{}), 24},
		{"two small fields (forks)", unsafe.Sizeof(idSlot[ForkID, forkRec]{}), 32},
		{"a pointer (owners)", unsafe.Sizeof(idSlot[RRefID, *ownerRec]{}), 32},
		{"a word (counts)", unsafe.Sizeof(idSlot[RRefID, uint64]{}), 32},
	} {
		if c.got != c.want {
			t.Errorf("a slot with %s is %d bytes, want %d", c.what, c.got, c.want)
		}
	}
}
