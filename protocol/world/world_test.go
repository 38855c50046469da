package world_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rrefkit/rref/explore"
	"github.com/rrefkit/rref/internal/worldtest"
	"github.com/rrefkit/rref/protocol"
	"github.com/rrefkit/rref/protocol/internal/pinger"
	"github.com/rrefkit/rref/protocol/internal/pingpb"
	"github.com/rrefkit/rref/protocol/world"
)

// pingWorld is a pinger "a" and a ponger "b".
func pingWorld(net world.Network, a pinger.Pinger, b pinger.Ponger) world.Config {
	a.Peer = "b"
	return world.Config{
		Network: net,
		Nodes: []world.Node{
			{Name: "a", Role: pingpb.PingerRole(func() pingpb.PingerHandler { p := a; return &p })},
			{Name: "b", Role: pingpb.PongerRole(func() pingpb.PongerHandler { p := b; return &p })},
		},
	}
}

func explored(t *testing.T, cfg world.Config, opt explore.Options) (explore.Result, func() *world.World) {
	t.Helper()
	start, err := world.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r := explore.Explore(start, opt)
	if r.Truncated != "" {
		t.Fatalf("incomplete: %s", r.Truncated)
	}
	return r, start
}

// bounded keeps a message in flight less than a retry, so that retries
// do not flood the network.
var bounded = world.Network{MaxDelay: pinger.RetryAfter / 2}

func TestReliableNetworkPasses(t *testing.T) {
	r, _ := explored(t, pingWorld(bounded, pinger.Pinger{Rounds: 2}, pinger.Ponger{}), explore.Options{})
	if !r.Passed() || r.States < 5 {
		t.Fatalf("%v after %d states\n%s", r.Violation, r.States, strings.Join(r.Trace, "\n"))
	}
}

// TestLossNeedsRetries: a lost message leaves the pinger waiting (a hot
// state at the end) unless it resends.
func TestLossNeedsRetries(t *testing.T) {
	lossy := bounded
	lossy.Loss = 1
	if r, _ := explored(t, pingWorld(lossy, pinger.Pinger{Rounds: 1}, pinger.Ponger{}), explore.Options{}); !r.Passed() {
		t.Fatalf("with retries: %v", r.Violation)
	}
	r, start := explored(t, pingWorld(lossy, pinger.Pinger{Rounds: 1, NoRetry: true}, pinger.Ponger{}), explore.Options{})
	if r.Passed() || r.Violation.Invariant != world.InvariantHot || !r.Shortest || len(r.Schedule) != 2 {
		t.Fatalf("without: %v shortest=%v %v", r.Violation, r.Shortest, r.Trace)
	}
	if again := explore.Replay(start, r.Schedule); again.Violation == nil || again.Violation.Error() != r.Violation.Error() {
		t.Fatalf("replay: %v", again.Violation)
	}
}

// TestUndeclaredEventIsAViolation: a ping that reaches a ponger that quit
// is an event the spec does not declare there.
func TestUndeclaredEventIsAViolation(t *testing.T) {
	r, _ := explored(t, pingWorld(bounded, pinger.Pinger{Rounds: 1}, pinger.Ponger{MayQuit: true}), explore.Options{})
	if r.Passed() || r.Violation.Invariant != world.InvariantSpec || !strings.Contains(r.Violation.Detail, "gone") {
		t.Fatalf("%v", r.Violation)
	}
}

// TestDuplicatesAndFIFO: a duplicated pong is skipped by the guard, on
// either kind of network; FIFO has no more states than unordered.
func TestDuplicatesAndFIFO(t *testing.T) {
	var states [2]int
	for i, order := range []world.Order{world.Unordered, world.FIFO} {
		net := bounded
		net.Order, net.Duplicates = order, 2
		r, _ := explored(t, pingWorld(net, pinger.Pinger{Rounds: 2}, pinger.Ponger{}), explore.Options{})
		if !r.Passed() {
			t.Fatalf("order %d: %v\n%s", order, r.Violation, strings.Join(r.Trace, "\n"))
		}
		states[i] = r.States
	}
	if states[1] > states[0] {
		t.Fatalf("FIFO %d states, unordered %d", states[1], states[0])
	}
}

// TestCrashKeepsOnlyTheRecord: a pinger that crashes restarts from its
// saved count (its pings' numbers never go back), and a ponger that
// crashes loses the pings in flight to it, which the retries cover.
func TestCrashKeepsOnlyTheRecord(t *testing.T) {
	fifo := bounded
	fifo.Order = world.FIFO // so that a ping's number going back shows a pinger that forgot
	cfg := pingWorld(fifo, pinger.Pinger{Rounds: 2}, pinger.Ponger{})
	cfg.Nodes[0].Crashes, cfg.Nodes[1].Crashes = 1, 1
	cfg.Invariants = []world.Check{{Name: "rounds", Check: func(w *world.World) error {
		if p, ok := world.Handler[*pinger.Ponger](w, "b"); ok && p.Regressed {
			return errors.New("the pinger numbered a ping below one answered")
		}
		return nil
	}}}
	r, _ := explored(t, cfg, explore.Options{})
	if !r.Passed() {
		t.Fatalf("%v\n%s", r.Violation, strings.Join(r.Trace, "\n"))
	}
	cfg.Nodes[0].Role = pingpb.PingerRole(func() pingpb.PingerHandler { return &forgetful{pinger.Pinger{Peer: "b", Rounds: 2}} })
	if r, _ := explored(t, cfg, explore.Options{}); r.Passed() || r.Violation.Invariant != "rounds" {
		t.Fatalf("a pinger that forgets its record: %v", r.Violation)
	}
}

// forgetful ignores its saved record.
type forgetful struct{ pinger.Pinger }

func (f *forgetful) Start(pingpb.PingerEnv, pingpb.Message) error { return nil }

// TestTimersAndTicks: with no delivery bound a retry may fire while its
// ping is in flight; a tick lets time pass between deliveries.
func TestTimersAndTicks(t *testing.T) {
	cfg := pingWorld(world.Network{MaxDelay: 2 * pinger.RetryAfter}, pinger.Pinger{Rounds: 1}, pinger.Ponger{})
	without, _ := explored(t, cfg, explore.Options{})
	cfg.Tick = pinger.RetryAfter / 2
	with, _ := explored(t, cfg, explore.Options{})
	if !without.Passed() || !with.Passed() || with.States <= without.States {
		t.Fatalf("without ticks %d states (%v), with %d (%v)", without.States, without.Violation, with.States, with.Violation)
	}
}

// TestCapacityDropsPastTheBound: a network of one message loses the
// second ping of a retry, so the run still ends.
func TestCapacityDropsPastTheBound(t *testing.T) {
	net := world.Network{Capacity: 1}
	r, _ := explored(t, pingWorld(net, pinger.Pinger{Rounds: 1}, pinger.Ponger{}), explore.Options{MaxStates: 10000})
	if !r.Passed() {
		t.Fatalf("%v", r.Violation)
	}
}

type withFunc struct {
	pinger.Pinger
	f func()
}

func TestStartRefusesBadConfigs(t *testing.T) {
	good := pingWorld(bounded, pinger.Pinger{Rounds: 1}, pinger.Ponger{})
	for name, change := range map[string]func(c *world.Config){
		"no nodes":      func(c *world.Config) { c.Nodes = nil },
		"duplicate":     func(c *world.Config) { c.Nodes[1].Name = "a" },
		"negative tick": func(c *world.Config) { c.Tick = -time.Second },
		"func in handler": func(c *world.Config) {
			c.Nodes[0].Role = pingpb.PingerRole(func() pingpb.PingerHandler { return &withFunc{f: func() {}} })
		},
	} {
		cfg := good
		cfg.Nodes = append([]world.Node(nil), good.Nodes...)
		change(&cfg)
		if _, err := world.Start(cfg); !errors.Is(err, world.ErrConfig) {
			t.Errorf("%s: %v, want ErrConfig", name, err)
		}
	}
}

// deaf never answers.
type deaf struct{ pinger.Ponger }

func (*deaf) OnPing(pingpb.PongerEnv, protocol.NodeID, *pingpb.Ping) error { return protocol.ErrSkip }

// TestLivenessSeesEndlessRetries: a pinger whose pings are never answered
// resends forever in a hot state, which no end check sees; Liveness reports
// the cycle as a lasso that replays.
func TestLivenessSeesEndlessRetries(t *testing.T) {
	cfg := pingWorld(bounded, pinger.Pinger{Rounds: 1}, pinger.Ponger{})
	cfg.Nodes[1].Role = pingpb.PongerRole(func() pingpb.PongerHandler { return &deaf{} })
	if r, _ := explored(t, cfg, explore.Options{}); !r.Passed() {
		t.Fatalf("without liveness: %v", r.Violation)
	}
	r, start := explored(t, cfg, explore.Options{Liveness: true})
	if r.Passed() || r.Violation.Invariant != explore.LivenessInvariant || len(r.Cycle) == 0 {
		t.Fatalf("%v", r.Violation)
	}
	if again := explore.ReplayLasso(start, r.Schedule, r.Cycle, false); again.Violation == nil {
		t.Fatal("the lasso does not replay")
	}
}

// TestCoverageOfHandlers: a world names its machines for explore's
// coverage, so a search over handlers written once reports the spec's
// transitions it never took: the pinger's retry only where messages are
// lost and it resends, and a duplicate Pong, ignored, only where the
// network duplicates.
func TestCoverageOfHandlers(t *testing.T) {
	const retry = "Pinger: waiting --Retry--> waiting"
	reliable, _ := explored(t, pingWorld(bounded, pinger.Pinger{Rounds: 1, NoRetry: true}, pinger.Ponger{}), explore.Options{Coverage: true})
	if reliable.Coverage == nil || len(reliable.Coverage.Machines) != 2 {
		t.Fatalf("coverage %+v, want both machines named", reliable.Coverage)
	}
	if taken, declared := reliable.Coverage.Counts(); taken == 0 || taken == declared {
		t.Errorf("reliable network: %d of %d transitions taken, want some but not all", taken, declared)
	}
	want := []string{retry, "Pinger: idle --Pong--> (ignored)", "Pinger: done --Pong--> (ignored)"}
	if got := reliable.Coverage.NotTaken(); !slices.Equal(got, want) {
		t.Errorf("a reliable network without retries: not taken %q, want %q", got, want)
	}
	lossy := bounded
	lossy.Loss = 1
	resending, _ := explored(t, pingWorld(lossy, pinger.Pinger{Rounds: 1}, pinger.Ponger{}), explore.Options{Coverage: true})
	if slices.Contains(resending.Coverage.NotTaken(), retry) {
		t.Errorf("with a loss and retries, %q never taken", retry)
	}
}

// TestSleepSetsKeepEveryState: a world's footprints (commute.go) let the
// search skip orders of steps that commute, never a state: with and
// without the sleep sets, every kind of network, timers, ticks and
// crashes reach the same states and the same verdict, in fewer
// transitions where nodes work side by side.
func TestSleepSetsKeepEveryState(t *testing.T) {
	withCrashes := func(c world.Config) world.Config {
		c.Nodes[0].Crashes, c.Nodes[1].Crashes = 1, 1
		return c
	}
	withTick := func(c world.Config) world.Config { c.Tick = pinger.RetryAfter / 2; return c }
	lossy, dup, fifo, capped := bounded, bounded, bounded, bounded
	lossy.Loss, dup.Duplicates, fifo.Order, capped.Capacity = 1, 1, world.FIFO, 1
	cases := map[string]world.Config{
		"reliable":        pingWorld(bounded, pinger.Pinger{Rounds: 2}, pinger.Ponger{}),
		"lossy":           pingWorld(lossy, pinger.Pinger{Rounds: 1}, pinger.Ponger{}),
		"lossy, no retry": pingWorld(lossy, pinger.Pinger{Rounds: 1, NoRetry: true}, pinger.Ponger{}),
		"duplicating":     pingWorld(dup, pinger.Pinger{Rounds: 2}, pinger.Ponger{}),
		"fifo":            pingWorld(fifo, pinger.Pinger{Rounds: 2}, pinger.Ponger{}),
		"capacity":        pingWorld(capped, pinger.Pinger{Rounds: 2}, pinger.Ponger{}),
		"ticks":           withTick(pingWorld(world.Network{MaxDelay: 2 * pinger.RetryAfter}, pinger.Pinger{Rounds: 1}, pinger.Ponger{})),
		"crashes":         withCrashes(pingWorld(bounded, pinger.Pinger{Rounds: 1}, pinger.Ponger{})),
		"quitting":        pingWorld(bounded, pinger.Pinger{Rounds: 2}, pinger.Ponger{MayQuit: true}),
	}
	worldtest.SleepSetsKeepEveryState(t, cases)
}
