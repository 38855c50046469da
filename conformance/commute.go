package conformance

import (
	"hash/maphash"

	"github.com/rrefkit/rref/explore"
)

// Sleep sets (explore.Commuter): each step records in the world's
// footprint the locations it reads and writes, so that the search can tell
// which steps commute. The rule: every read or write of something another
// step may change is recorded, including what made a command ready. What
// only a crash, an advance or a duplicate command changes (dead workers,
// exemptions of created values, pending duplications' list) needs no
// record, as those commands depend on everything. The program's and the
// monitor's maps are tables (cow.go) that record every access themselves;
// TestTablesAreTracked keeps every other way to them to a short list of
// functions outside any step's footprint. What is left by hand: the cores
// (world.core and world.peek), the messages in flight, the program
// counter, a waiting return, the duplications and the counted facts
// (counters.go), each behind a few accessors. TestIndependentStepsCommute
// checks the records against the steps themselves, pair by pair.

// The tables locations are in.
const (
	tableCore          = iota // a worker's core, by worker id
	tableInflight             // the messages in flight, as a whole
	tableHandles              // the program's handles, by worker and name
	tableFetches              // the program's last fetch of each name
	tableFetchIDs             // fetches not yet answered, by worker and fetch id
	tableReturns              // calls whose answer binds a handle, by caller and call id
	tableTravel               // handles on their way to a program, by fork
	tableDups                 // the duplications still to do (one location)
	tableReturning            // whether a return command waits (one location)
	tableProgram              // the program counter (one location)
	tableValues               // monitor: values made, by RRef
	tableFailing              // monitor: values whose function fails, by RRef
	tableDeletes              // monitor: deletes sent, by fork
	tableAnswered             // monitor: forks the owner answered
	tableRefused              // monitor: forks the owner refused
	tableChildren             // monitor: a fork's children
	tablePath                 // monitor: the workers a fork went through
	tableExempt               // monitor: forks a crash may have cut
	tableRemoteArrived        // monitor: values whose RemoteCall arrived
	tableOwners               // monitor: a value's owner
	tableRuns                 // monitor: the functions run, by value or call
	tableFacts                // monitor: its counted facts, by kind and key (counters.go)
	tableExemptRRef           // monitor: values a crash may have cut before their RemoteCall arrived
)

// cmdEvent marks a command's event, named by the program counter: no
// message digest takes this value but with odds of 2^-64.
const cmdEvent = ^uint64(0)

// Event names choice c alike in every state it is enabled in: a delivery
// by its message's digest, the next command by the program counter.
func (w *world) Event(c int) (explore.Event, bool) {
	if c < 0 {
		return explore.Event{cmdEvent, uint64(w.prog.PC())}, true
	}
	return explore.Event(w.inflight[c].digest), true
}

// Footprint is what the last step read and wrote.
func (w *world) Footprint() *explore.Footprint { return w.fp }

// locSeed keys the hashes of handle names: fixed for the process, like
// the state digests.
var locSeed = maphash.MakeSeed()

func forkKey(f ForkID) uint64 {
	return f.Local*0x9e3779b97f4a7c15 ^ uint64(f.Worker)
}

func rrefKey(id RRefID) uint64 { return forkKey(ForkID(id)) }

func handleLoc(k handleKey) uint64 {
	return maphash.String(locSeed, k.name)*31 ^ uint64(k.w)
}

func pairKey(p [2]uint64) uint64 { return p[1]*0x9e3779b97f4a7c15 ^ p[0] }

func (w *world) read(t int, key uint64)  { w.fp.Read(explore.Location(t, key)) }
func (w *world) write(t int, key uint64) { w.fp.Write(explore.Location(t, key)) }
func (w *world) set(t int, key uint64)   { w.fp.Set(explore.Location(t, key)) }
