package conformance

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rrefkit/rref/internal/hooks"

	"github.com/rrefkit/rref/generated/rref"
	"github.com/rrefkit/rref/internal/scenario"
	"github.com/rrefkit/rref/runtime/worker"
)

// RuntimeResult is the outcome of one scenario run against real workers.
type RuntimeResult struct {
	Scenario  string
	Runs      int
	Skipped   string // why the scenario cannot run on the runtime target
	Violation *Violation
	Seed      int64
	Duration  time.Duration
}

// runtimeSupported reports why a scenario cannot run against the runtime:
// commands that reach inside the protocol have no public API.
func runtimeSupported(sc *Scenario) string {
	for _, c := range sc.Cmds {
		switch c.Op {
		case scenario.OpTimeout, scenario.OpAdvance, scenario.OpDuplicate:
			// The target would refuse them: say why before any run.
			t := &rtTarget{}
			return scenario.Exec(t, &c).Error()
		}
	}
	return ""
}

// ExploreRuntime runs a scenario runs times against workers in one process
// over the mem transport, each run with its own seed for the random delay of
// every protocol message, so messages overtake one another. It checks the
// expectations, every fetch's result (S4), termination (L1) and, once every
// handle is released, that nothing is left on any live worker (L2).
func ExploreRuntime(sc *Scenario, runs int, seed int64) RuntimeResult {
	return ExploreRuntimeOver(sc, "mem", runs, seed)
}

// ExploreRuntimeOver is ExploreRuntime over transport "mem" (workers in one
// group, in-memory rings), "shm" (every worker its own Start, each pair
// joined by shared memory, as processes on one host would be) or "fabric"
// (the same over libfabric on loopback, in a build with -tags rreffabric;
// "fabric:PROVIDER" names libfabric's provider).
func ExploreRuntimeOver(sc *Scenario, transport string, runs int, seed int64) RuntimeResult {
	start := time.Now()
	r := RuntimeResult{Scenario: sc.Name}
	if why := runtimeSupported(sc); why != "" {
		r.Skipped = why
		return r
	}
	for i := 0; i < runs; i++ {
		r.Runs++
		if v := runRuntime(sc, transport, seed+int64(i)); v != nil {
			r.Violation, r.Seed = v, seed+int64(i)
			break
		}
	}
	r.Duration = time.Since(start)
	return r
}

// rtTarget runs a scenario's commands on real workers: a scenario.Target.
// Handles arrive on the workers' own goroutines (a passed handle when the
// callee's function runs, a fetch's result when its future completes), so
// the program waits on changed, closed and replaced at every arrival.
type rtTarget struct {
	ws     []*worker.Worker
	byName map[string]*worker.Worker
	ctx    context.Context
	calls  int // numbers the functions that bind passed and returned handles

	mu      sync.Mutex
	changed chan struct{}
	dead    map[string]bool
	handles map[string]*worker.RRef[int] // "W/x"
	holds   map[string]scenario.Holding  // what the handle bound to "W/x" holds
	gone    map[string]bool              // released
	fetches map[string]*scenario.Fetched
}

func rtKey(w, x string) string { return w + "/" + x }

// update changes the target's state under its lock and wakes the program.
func (t *rtTarget) update(f func()) {
	t.mu.Lock()
	f()
	close(t.changed)
	t.changed = make(chan struct{})
	t.mu.Unlock()
}

// waitFor waits until ready holds or the deadline passes; ready is
// checked with the target unlocked (it calls the target's methods).
func (t *rtTarget) waitFor(deadline time.Time, ready func() bool) bool {
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	for {
		t.mu.Lock()
		ch := t.changed // taken before the check: a change after it closes ch
		t.mu.Unlock()
		if ready() {
			return true
		}
		select {
		case <-ch:
		case <-timer.C:
			return ready()
		}
	}
}

func (t *rtTarget) handle(w, x string) *worker.RRef[int] {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.handles[rtKey(w, x)]
}

func (t *rtTarget) holding(w, x string) scenario.Holding {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.holds[rtKey(w, x)]
}

func (t *rtTarget) New(w, x string, v int64) error {
	r, err := worker.NewRRef(t.byName[w], int(v))
	if err != nil {
		return err
	}
	t.update(func() {
		t.handles[rtKey(w, x)] = r
		t.holds[rtKey(w, x)] = scenario.Holding{Known: true, Value: strconv.FormatInt(v, 10)}
	})
	return nil
}

func (t *rtTarget) Remote(w, owner, x string, v int64, fail bool) error {
	fn := scenario.FnIdentity
	if fail {
		fn = scenario.FnFail
	}
	r, err := worker.Remote[int](t.ctx, t.byName[w], owner, fn, int(v))
	if err != nil {
		return err
	}
	t.update(func() {
		t.handles[rtKey(w, x)] = r
		t.holds[rtKey(w, x)] = scenario.Holding{Known: true, Value: strconv.FormatInt(v, 10), Fail: fail}
	})
	return nil
}

func (t *rtTarget) Pass(w, to, x, y string) error {
	t.calls++
	fn := fmt.Sprintf("__pass_%d", t.calls)
	holds := t.holding(w, x) // what travels: x may be bound again before it arrives
	worker.Register(t.byName[to], fn, func(ctx context.Context, got *worker.RRef[int]) (int, error) {
		kept := got.Keep()
		t.update(func() {
			t.handles[rtKey(to, y)] = kept
			t.holds[rtKey(to, y)] = holds
		})
		return 0, nil
	})
	// Go sends the call now, so a release on the next line comes after.
	worker.Go[int](t.ctx, t.byName[w], to, fn, t.handle(w, x))
	return nil
}

func (t *rtTarget) Return(w, caller, x, y string) error {
	t.calls++
	fn := fmt.Sprintf("__return_%d", t.calls)
	r, holds := t.handle(w, x), t.holding(w, x)
	worker.Register(t.byName[w], fn, func(ctx context.Context, _ int) (*worker.RRef[int], error) { return r.Clone() })
	got, err := worker.Call[*worker.RRef[int]](t.ctx, t.byName[caller], w, fn, 0)
	if err != nil {
		return err
	}
	t.update(func() {
		t.handles[rtKey(caller, y)] = got
		t.holds[rtKey(caller, y)] = holds
	})
	return nil
}

func (t *rtTarget) Fetch(w, x string) error {
	k := rtKey(w, x)
	f := &scenario.Fetched{Issued: true, Holds: t.holding(w, x)}
	t.update(func() { t.fetches[k] = f })
	fut := t.handle(w, x).Fetch(t.ctx) // issued now: a release on the next line comes after
	go func() {
		v, err := fut.Wait(t.ctx)
		t.update(func() {
			f.Done, f.Kind = true, errKind(err)
			if f.Kind == "" {
				f.Value = strconv.Itoa(v)
			}
		})
	}()
	return nil
}

func (t *rtTarget) Release(w, x string) error {
	r := t.handle(w, x)
	t.update(func() { t.gone[rtKey(w, x)] = true })
	r.Release()
	return nil
}

func (t *rtTarget) Timeout(w, x string) error {
	return errors.New("timeout marks a remote timed out from inside the core; the runtime does it by RemoteTimeout")
}

func (t *rtTarget) Advance(w string, ticks int64) error {
	return errors.New("advance moves the core's clock from inside; the runtime's clock is real time (its sweeper ticks every twentieth of Config.CallTimeout)")
}

func (t *rtTarget) Duplicate(from, to, kind string) error {
	return errors.New("duplicate resends a control message; the runtime's transport delivers exactly once")
}

func (t *rtTarget) Crash(w string) error {
	t.update(func() { t.dead[w] = true })
	return t.byName[w].Close()
}

// Settle waits for the group to be quiet (worker.SettleGroup: the
// shutdown barrier's termination detection).
func (t *rtTarget) Settle() error {
	ctx, cancel := context.WithTimeout(t.ctx, rtStepTimeout)
	defer cancel()
	return worker.SettleGroup(ctx, t.ws)
}

func (t *rtTarget) Alive(w string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return !t.dead[w]
}

func (t *rtTarget) Holds(w, x string) bool { return t.handle(w, x) != nil }

func (t *rtTarget) Fetched(w, x string) scenario.Fetched {
	t.mu.Lock()
	defer t.mu.Unlock()
	if f := t.fetches[rtKey(w, x)]; f != nil {
		return *f
	}
	return scenario.Fetched{}
}

// Quiet is true: Settle itself waits for the network.
func (t *rtTarget) Quiet() bool { return true }

// Busy is empty: a return's call completes before Return returns.
func (t *rtTarget) Busy() string { return "" }

func (t *rtTarget) Counters(w string) (scenario.Counters, error) {
	if err := t.Settle(); err != nil {
		return scenario.Counters{}, err
	}
	d := t.byName[w].DebugInfo()
	return scenario.Counters{Owners: d.Owners, Forks: d.Forks, PendingUsers: d.PendingUsers, PendingChildren: d.PendingChildren}, nil
}

func (t *rtTarget) Unclean() string {
	for _, w := range t.ws {
		if t.Alive(w.Name()) && !w.DebugInfo().Clean() {
			return fmt.Sprintf("%s is not clean: %+v", w.Name(), w.DebugInfo().Counters)
		}
	}
	return ""
}

func errKind(err error) string {
	var ue *worker.UserError
	switch {
	case err == nil:
		return ""
	case errors.As(err, &ue):
		return "user"
	case errors.Is(err, worker.ErrDeleted):
		return "deleted"
	case errors.Is(err, worker.ErrLost):
		return "lost"
	case errors.Is(err, worker.ErrOwnerFailed):
		return "owner-failed"
	case errors.Is(err, worker.ErrTimeout):
		return "timeout"
	}
	return "other: " + err.Error()
}

var shmGroups atomic.Int64

// FabricTransport reports whether transport is the runtime target's
// "fabric" (libfabric's default provider) or "fabric:PROVIDER", and the
// provider it names ("" for the default).
func FabricTransport(transport string) (provider string, ok bool) {
	if transport == "fabric" {
		return "", true
	}
	provider, ok = strings.CutPrefix(transport, "fabric:")
	if !ok {
		return "", false // CutPrefix hands back the whole string
	}
	return provider, true
}

// startWorkers makes the scenario's workers over the transport.
func startWorkers(names []string, transport string, cfg worker.Config) ([]*worker.Worker, error) {
	provider, onFabric := FabricTransport(transport)
	if transport != "shm" && !onFabric {
		return worker.NewGroup(names, cfg)
	}
	group := fmt.Sprintf("shm:rc%d-%d", os.Getpid(), shmGroups.Add(1))
	peers := make([]worker.Peer, len(names))
	for i, n := range names {
		peers[i] = worker.Peer{Name: n, Addr: group}
		if onFabric {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				return nil, err
			}
			peers[i].Addr = "fabric:" + ln.Addr().String()
			if provider != "" {
				peers[i].Addr = "fabric:" + provider + "@" + ln.Addr().String()
			}
			ln.Close()
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ws := make([]*worker.Worker, len(names))
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	for i, n := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ws[i], errs[i] = worker.Start(ctx, n, peers, []byte("conformance"), cfg)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		for _, w := range ws {
			if w != nil {
				w.Close()
			}
		}
		return nil, err
	}
	return ws, nil
}

// rtStepTimeout bounds each wait of a runtime run: far above a step's
// time on a loaded machine, so that only a real hang reports L1.
const rtStepTimeout = 5 * time.Second

func runRuntime(sc *Scenario, transport string, seed int64) *Violation {
	var rmu sync.Mutex
	rng := rand.New(rand.NewSource(seed))
	jitter := func() time.Duration {
		rmu.Lock()
		defer rmu.Unlock()
		return time.Duration(rng.Intn(300)) * time.Microsecond
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	ws, err := startWorkers(sc.Workers, transport, withJitter(worker.Config{Logger: quiet, CallTimeout: 10 * time.Second}, jitter))
	if err != nil {
		return &Violation{Invariant: "runtime", Detail: err.Error()}
	}
	t := &rtTarget{ws: ws, byName: map[string]*worker.Worker{}, ctx: context.Background(), changed: make(chan struct{}),
		dead: map[string]bool{}, handles: map[string]*worker.RRef[int]{}, holds: map[string]scenario.Holding{}, gone: map[string]bool{}, fetches: map[string]*scenario.Fetched{}}
	for _, w := range ws {
		t.byName[w.Name()] = w
		worker.Register(w, scenario.FnIdentity, func(ctx context.Context, v int) (int, error) { return v, nil })
		worker.Register(w, scenario.FnFail, func(ctx context.Context, v int) (int, error) { return 0, errors.New("scenario function failed") })
	}
	defer func() {
		for _, w := range ws {
			w.Close()
		}
	}()
	prog := scenario.NewProgram(sc)
	for !prog.Done() {
		if !t.waitFor(time.Now().Add(rtStepTimeout), func() bool { return prog.Ready(t) }) {
			c := prog.Next()
			return &Violation{Invariant: rref.InvariantL1, Line: c.Line, Detail: prog.Blocked(t)}
		}
		if v := prog.Step(t); v != nil {
			return v
		}
	}
	// Every fetch ends (L1) with the value or its stored error (S4).
	t.waitFor(time.Now().Add(rtStepTimeout), func() bool {
		t.mu.Lock()
		defer t.mu.Unlock()
		for k, f := range t.fetches {
			w, _, _ := strings.Cut(k, "/")
			if !f.Done && !t.dead[w] {
				return false
			}
		}
		return true
	})
	if err := t.Settle(); err != nil {
		return &Violation{Invariant: rref.InvariantL1, Detail: fmt.Sprintf("the network did not settle at the end: %v", err)}
	}
	if v := prog.End(t); v != nil {
		return v
	}
	// L2: once every handle on a live worker is released, nothing is left.
	t.mu.Lock()
	all := true
	for k := range t.handles {
		w, _, _ := strings.Cut(k, "/")
		if !t.dead[w] && !t.gone[k] {
			all = false
		}
	}
	var live []*worker.Worker
	for _, w := range ws {
		if !t.dead[w.Name()] {
			live = append(live, w)
		}
	}
	t.mu.Unlock()
	if all {
		// Settled, every live worker must hold nothing (as the shutdown
		// barrier would check, without its n² report frames).
		sctx, cancel := context.WithTimeout(t.ctx, rtStepTimeout)
		defer cancel()
		if err := worker.SettleGroup(sctx, live); err != nil {
			return &Violation{Invariant: rref.InvariantL1, Detail: err.Error()}
		}
		for _, w := range live {
			if d := w.DebugInfo(); !d.Clean() {
				return &Violation{Invariant: rref.InvariantL2, Detail: fmt.Sprintf("every handle is released and the group settled, yet %s holds %+v", w.Name(), d.Counters)}
			}
		}
	}
	return nil
}

// withJitter is cfg holding each protocol message back by jitter.
func withJitter(cfg worker.Config, jitter func() time.Duration) worker.Config {
	hooks.WorkerJitter(&cfg, jitter)
	return cfg
}
