package conformance

import (
	"time"

	"github.com/rrefkit/rref/explore"
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
		CheckClones: o.checkClones, NoSleepSets: o.NoSleepSets || o.Unreduced, ReorderAfter: o.reorderAfter}
}

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
