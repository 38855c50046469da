package explore

// Commuter is implemented by a model that can say which of its steps
// commute. The exhaustive search then prunes, with sleep sets, the orders
// that only swap independent steps: it still enters every reachable state
// (the differential tests compare the counts with Options.NoSleepSets),
// but takes far fewer of the transitions that lead back into states
// already seen. Schedules are then not counted (Result.Reduced).
//
// Two steps are independent in a state when their footprints are
// (Footprint.Independent): neither writes what the other reads or writes.
// Taking them in either order must then reach the same state with the same
// verdict, and each must leave the other enabled. A model makes that true
// by recording, during each Step, every location whose value another step
// could change that the step reads (including what decided the step was
// enabled) or writes; a step it cannot describe calls Footprint.Everything.
type Commuter interface {
	// Event names the event behind choice c alike in every state it is
	// enabled in (a message by its sender, receiver and bytes). ok false:
	// the step commutes with nothing and is never put to sleep.
	Event(c int) (e Event, ok bool)
	// Footprint is what the last Step read and wrote. The engine copies
	// it before the next Step.
	Footprint() *Footprint
}

// Event is a step's name, alike in every state it is enabled in.
type Event [2]uint64

// footprintCap is how many distinct locations a footprint names of each
// kind before it gives up and counts as touching everything: a delivery in
// the RRef model touches a core or two and a handful of monitor facts, and
// a footprint is copied into every sleep set it joins.
const footprintCap = 16

// Footprint records what one step read and wrote, as locations: numbers
// the model gives meaning to, each in one of up to Tables tables. The zero
// Footprint touches nothing.
type Footprint struct {
	everything bool
	nr, nw, ns uint8
	// tablesRead are the tables read whole, tablesWrote those written
	// anywhere (by Write, Set or Add): a whole read conflicts with either.
	tablesRead, tablesWrote uint64
	reads, writes, sets     [footprintCap]uint64
}

// Tables is how many tables locations may be in.
const Tables = 64

// locationKeyBits is the bits of a location below its table.
const locationKeyBits = 58

// Location is the location of key in table t (0 <= t < Tables). Keys that
// agree in their low 58 bits are one location: a collision can only make
// two steps look dependent, never independent.
func Location(t int, key uint64) uint64 {
	return uint64(t)<<locationKeyBits | key&(1<<locationKeyBits-1)
}

func table(loc uint64) uint { return uint(loc >> locationKeyBits) }

// Reset empties the footprint, for the next step.
func (f *Footprint) Reset() { *f = Footprint{} }

// Everything marks the step as dependent on every other.
func (f *Footprint) Everything() { f.everything = true }

// Read records a read of loc.
func (f *Footprint) Read(loc uint64) { f.record(&f.reads, &f.nr, loc) }

// Write records a write of loc; a read-modify-write needs only this.
func (f *Footprint) Write(loc uint64) {
	f.tablesWrote |= 1 << table(loc)
	f.record(&f.writes, &f.nw, loc)
}

// Set records a write of loc that stores the value every such write of loc
// stores (a fact that becomes true, an owner that never changes): two Sets
// of one location commute, a Set and a Read or Write do not.
func (f *Footprint) Set(loc uint64) {
	f.tablesWrote |= 1 << table(loc)
	f.record(&f.sets, &f.ns, loc)
}

// Add records a change to table t that commutes with every other Add to it
// (a message added to or taken from a multiset): it conflicts only with a
// ReadTable of t.
func (f *Footprint) Add(t int) { f.tablesWrote |= 1 << t }

// ReadTable records a read of all of table t (an iteration over it, or its
// size).
func (f *Footprint) ReadTable(t int) { f.tablesRead |= 1 << t }

func (f *Footprint) record(ls *[footprintCap]uint64, n *uint8, loc uint64) {
	if f.everything || contains(ls[:*n], loc) {
		return
	}
	if int(*n) == footprintCap {
		f.everything = true
		return
	}
	ls[*n] = loc
	*n++
}

// Independent reports whether the steps f and g commute: neither writes a
// location or a table the other reads or writes.
func (f *Footprint) Independent(g *Footprint) bool { return f.independent(g, 0, false) }

func contains(ls []uint64, l uint64) bool {
	for _, x := range ls {
		if x == l {
			return true
		}
	}
	return false
}

// Equal reports whether f and g name the same locations, in any order: a
// model's tests use it to check that a step's footprint does not depend on
// the steps independent of it.
func (f *Footprint) Equal(g *Footprint) bool {
	same := func(a, b []uint64) bool {
		if len(a) != len(b) {
			return false
		}
		for _, l := range a {
			if !contains(b, l) {
				return false
			}
		}
		return true
	}
	return f.everything == g.everything && f.tablesRead == g.tablesRead && f.tablesWrote == g.tablesWrote &&
		same(f.reads[:f.nr], g.reads[:g.nr]) && same(f.writes[:f.nw], g.writes[:g.nw]) && same(f.sets[:f.ns], g.sets[:g.ns])
}

// Reorderer is a Commuter that can also tell, in a state, whether two steps
// whose footprints conflict commute all the same: when the conflict is over
// one part of the state that the model can try both orders on, cheaply or
// from a cache (the RRef model: two messages to one core). The search then
// copies each state for its every step, so that the state is intact when it
// asks.
type Reorderer interface {
	Commuter
	// Commutes reports whether steps a and b, both enabled in this state,
	// commute here: either order reaches the same state with the same
	// verdict, and each does there what it does here. fa and fb are their
	// footprints (for a step asleep, from where it was taken: it does the
	// same here). A model answers false whenever unsure.
	Commutes(a, b Event, fa, fb *Footprint) bool
}

// IndependentExcept is Independent with conflicts over the location loc
// ignored: for a Reorderer that checks that location itself.
func (f *Footprint) IndependentExcept(g *Footprint, loc uint64) bool {
	return f.independent(g, loc, true)
}

// independent is Independent, ignoring conflicts over except when skip.
func (f *Footprint) independent(g *Footprint, except uint64, skip bool) bool {
	if f.everything || g.everything {
		return false
	}
	if f.tablesRead&g.tablesWrote != 0 || g.tablesRead&f.tablesWrote != 0 {
		return false
	}
	hit := func(ls []uint64, l uint64) bool { return !(skip && l == except) && contains(ls, l) }
	fr, fw, fs := f.reads[:f.nr], f.writes[:f.nw], f.sets[:f.ns]
	gr, gw, gs := g.reads[:g.nr], g.writes[:g.nw], g.sets[:g.ns]
	for _, l := range fw {
		if hit(gr, l) || hit(gw, l) || hit(gs, l) {
			return false
		}
	}
	for _, l := range fs {
		if hit(gr, l) || hit(gw, l) {
			return false
		}
	}
	for _, l := range fr {
		if hit(gw, l) || hit(gs, l) {
			return false
		}
	}
	return true
}
