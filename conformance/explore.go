package conformance

import (
	"time"

	"github.com/rrefkit/rref/explore"
	"github.com/rrefkit/rref/generated/rref"
	"github.com/rrefkit/rref/genrt"
)

// The scenario runner is one model of package explore: these are its types.
type (
	// Mode selects how schedules are chosen.
	Mode = explore.Mode
	// Violation is a broken invariant or a failed expectation.
	Violation = explore.Violation
)

const (
	Exhaustive = explore.Exhaustive // every delivery order, with state hashing
	Random     = explore.Random     // seeded random walks
	PCT        = explore.PCT        // seeded priority-based schedules with change points
)

// Options bound an exploration of one scenario.
type Options struct {
	Mode      Mode
	MaxStates int           // exhaustive: distinct states before giving up (0: explore.DefaultMaxStates)
	MaxDepth  int           // steps in one schedule (0: explore.DefaultMaxDepth)
	MaxMemory uint64        // live heap bytes before giving up (0: explore.DefaultMaxMemory)
	Timeout   time.Duration // per scenario (0: none)
	Seed      int64         // random and pct: the first walk's seed
	Walks     int           // random and pct: how many schedules (0: 1000)
	Depth     int           // pct: change points (0: 3)
	Workers   int           // exhaustive: goroutines searching (0: one; negative: one per CPU)
	Factory   CoreFactory   // nil: the production core
	// Unreduced explores every order of the steps the reductions treat as
	// commuting (see world.eager); the differential tests compare verdicts
	// with and without them.
	Unreduced bool
	// NoSleepSets explores every order of the deliveries that commute
	// (explore.Options.NoSleepSets); Unreduced implies it.
	NoSleepSets bool
	// reorderAfter is explore.Options.ReorderAfter, for the tests.
	reorderAfter int
	// noDeliveryCache makes every delivery run the core (world.deliver),
	// for the differential tests.
	noDeliveryCache bool
	// checkDeliveries runs every delivery taken from the cache afresh as
	// well and keeps the first difference (world.recheck).
	checkDeliveries bool
	// plain explores without recycling copies and without the cache of
	// deliveries: the baseline of the differential tests.
	plain bool
	// Progress, when set, is told of a long exhaustive search: the states
	// seen and the time spent, about every ProgressEvery.
	Progress func(states int, elapsed time.Duration)
	// Coverage reports in Result.Coverage which transitions of the RRef
	// spec's machines the search's steps took (explore.Options.Coverage):
	// searches that record it run one at a time.
	Coverage bool
	// checkClones runs explore's clone check over encodings computed
	// afresh, cached ones ignored (world.fresh): the tests' proof that the
	// copy-on-write of cores, program and monitor shares nothing a step writes.
	checkClones bool
}

// ProgressEvery is how often a long search reports its progress.
const ProgressEvery = explore.ProgressEvery

func (o Options) explore() explore.Options {
	return explore.Options{Mode: o.Mode, MaxStates: o.MaxStates, MaxDepth: o.MaxDepth, MaxMemory: o.MaxMemory,
		Timeout: o.Timeout, Seed: o.Seed, Walks: o.Walks, Depth: o.Depth, Workers: o.Workers, Progress: o.Progress,
		CheckClones: o.checkClones, NoSleepSets: o.NoSleepSets || o.Unreduced, ReorderAfter: o.reorderAfter,
		Coverage: o.Coverage}
}

// Machines implements explore.Coverer: a coverage report lists every
// machine of the RRef spec, those a scenario never steps too.
//
// The world is no explore.Symmetric, though its workers run one core: a
// scenario names its workers in its commands, so a world with two workers
// renamed is a state of another program, and each core draws its ids from
// a seed of its own, which travel in messages that no renaming of workers
// maps onto each other. Programs alike but for their workers' names are
// the symmetry the suite has, and Enumerate writes each of them once.
func (w *world) Machines() []*genrt.MachineInfo { return rref.Machines }

// Result is the outcome of exploring one scenario.
type Result struct {
	Scenario string
	explore.Result
}

// Explore runs one scenario under opt.
func Explore(sc *Scenario, opt Options) Result {
	start := func() *world {
		w := newWorld(sc, opt.Factory, opt.Unreduced)
		w.fresh = opt.checkClones
		// A walk follows one schedule: a delivery seldom comes back to a
		// core state it saw, and remembering costs a copy of the core.
		w.noDeliveryCache = opt.noDeliveryCache || opt.Mode != "" && opt.Mode != Exhaustive
		w.checkDeliveries = opt.checkDeliveries
		if opt.plain {
			w.spare = nil // nothing recycled, nothing cached (world.Recycle, world.deliver)
		}
		return w
	}
	return Result{Scenario: sc.Name, Result: explore.Explore(start, opt.explore())}
}

// Replay runs one schedule (choice positions) and reports its trace.
func Replay(sc *Scenario, schedule []int, factory CoreFactory) Result {
	start := func() *world {
		w := newWorld(sc, factory, false)
		w.noDeliveryCache = true // one schedule: see Explore
		return w
	}
	return Result{Scenario: sc.Name, Result: explore.Replay(start, schedule)}
}

// ParseSchedule decodes a schedule printed by a failing run.
func ParseSchedule(s string) ([]int, error) { return explore.ParseSchedule(s) }
