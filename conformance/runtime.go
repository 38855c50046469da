package conformance

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rrefkit/rref/generated/rref"
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
		case OpTimeout:
			return "timeout marks a remote timed out from inside the core; the runtime does it by RemoteTimeout"
		case OpDuplicate:
			return "duplicate resends a control message; the runtime's transport delivers exactly once"
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
// group, in-memory rings) or "shm" (every worker its own Start, each pair
// joined by shared memory, as processes on one host would be).
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

type rtFetch struct {
	done  bool
	value int
	kind  string
}

type rtState struct {
	mu      sync.Mutex
	handles map[string]*worker.RRef[int] // "W/x"
	gone    map[string]bool              // released
	fetches map[string]*rtFetch
	failed  error
}

func (s *rtState) wait(deadline time.Time, ready func() bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for !ready() {
		if time.Now().After(deadline) {
			return false
		}
		s.mu.Unlock()
		time.Sleep(200 * time.Microsecond)
		s.mu.Lock()
	}
	return true
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

// startWorkers makes the scenario's workers over the transport.
func startWorkers(names []string, transport string, cfg worker.Config) ([]*worker.Worker, error) {
	if transport != "shm" {
		return worker.NewGroup(names, cfg)
	}
	group := fmt.Sprintf("shm:rc%d-%d", os.Getpid(), shmGroups.Add(1))
	peers := make([]worker.Peer, len(names))
	for i, n := range names {
		peers[i] = worker.Peer{Name: n, Addr: group}
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

func runRuntime(sc *Scenario, transport string, seed int64) *Violation {
	const stepTimeout = 5 * time.Second
	var rmu sync.Mutex
	rng := rand.New(rand.NewSource(seed))
	jitter := func() time.Duration {
		rmu.Lock()
		defer rmu.Unlock()
		return time.Duration(rng.Intn(300)) * time.Microsecond
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	ws, err := startWorkers(sc.Workers, transport, worker.Config{Logger: quiet, Jitter: jitter, CallTimeout: 10 * time.Second})
	if err != nil {
		return &Violation{Invariant: "runtime", Detail: err.Error()}
	}
	byName := map[string]*worker.Worker{}
	dead := map[string]bool{}
	for _, w := range ws {
		byName[w.Name()] = w
		worker.Register(w, "identity", func(ctx context.Context, v int) (int, error) { return v, nil })
		worker.Register(w, "fail", func(ctx context.Context, v int) (int, error) { return 0, errors.New("scenario function failed") })
	}
	defer func() {
		for _, w := range ws {
			w.Close()
		}
	}()
	st := &rtState{handles: map[string]*worker.RRef[int]{}, gone: map[string]bool{}, fetches: map[string]*rtFetch{}}
	values := map[string]string{} // handle key -> expected value, or "fail"
	ctx := context.Background()
	key := func(w, x string) string { return w + "/" + x }
	has := func(k string) func() bool { return func() bool { _, ok := st.handles[k]; return ok } }
	fail := func(inv string, line int, format string, args ...any) *Violation {
		return &Violation{Invariant: inv, Line: line, Detail: fmt.Sprintf(format, args...)}
	}
	// The network is settled when nothing waits to be sent and every message
	// sent was received; after a crash, messages to or from the dead never
	// balance, so it is settled once the totals stop moving.
	var lastSent, lastRecv uint64
	settled := func() bool {
		var sent, recv uint64
		for _, w := range ws {
			if dead[w.Name()] {
				continue
			}
			d := w.DebugInfo()
			if d.Outgoing > 0 || d.PendingCalls > 0 {
				return false
			}
			sent += d.MessagesSent
			recv += d.MessagesReceived
		}
		moved := sent != lastSent || recv != lastRecv
		lastSent, lastRecv = sent, recv
		if len(dead) > 0 {
			return !moved
		}
		return sent == recv
	}
	settle := func() bool {
		deadline := time.Now().Add(stepTimeout)
		stable := 0
		for time.Now().Before(deadline) {
			if settled() {
				stable++
				if stable >= 5 {
					return true
				}
			} else {
				stable = 0
			}
			time.Sleep(2 * time.Millisecond)
		}
		return false
	}
	for _, c := range sc.Cmds {
		deadline := time.Now().Add(stepTimeout)
		w := byName[c.W]
		k := key(c.W, c.X)
		switch c.Op {
		case OpNew:
			r, err := worker.NewRRef(w, int(c.Value))
			if err != nil {
				return fail("runtime", c.Line, "%v", err)
			}
			st.mu.Lock()
			st.handles[k] = r
			values[k] = strconv.Itoa(int(c.Value))
			st.mu.Unlock()
		case OpRemote:
			fn := "identity"
			if c.Fail {
				fn = "fail"
			}
			r, err := worker.Remote[int](ctx, w, c.V, fn, int(c.Value))
			if err != nil {
				return fail(rref.InvariantL1, c.Line, "remote: %v", err)
			}
			st.mu.Lock()
			st.handles[k] = r
			values[k] = strconv.Itoa(int(c.Value))
			if c.Fail {
				values[k] = "fail"
			}
			st.mu.Unlock()
		case OpPass, OpReturn:
			if !st.wait(deadline, has(k)) {
				return fail(rref.InvariantL1, c.Line, "%s never got %s", c.W, c.X)
			}
			st.mu.Lock()
			r := st.handles[k]
			yk := key(c.V, c.Y)
			values[yk] = values[k]
			st.mu.Unlock()
			if c.Op == OpPass {
				fn := fmt.Sprintf("__pass_%d", c.Line)
				worker.Register(byName[c.V], fn, func(ctx context.Context, got *worker.RRef[int]) (int, error) {
					st.mu.Lock()
					st.handles[yk] = got.Keep()
					st.mu.Unlock()
					return 0, nil
				})
				// Go sends the call now, so a release on the next line comes after.
				worker.Go[int](ctx, w, c.V, fn, r)
			} else {
				fn := fmt.Sprintf("__return_%d", c.Line)
				worker.Register(w, fn, func(ctx context.Context, _ int) (*worker.RRef[int], error) { return r.Clone() })
				got, err := worker.Call[*worker.RRef[int]](ctx, byName[c.V], c.W, fn, 0)
				if err != nil {
					return fail(rref.InvariantL1, c.Line, "return: %v", err)
				}
				st.mu.Lock()
				st.handles[yk] = got
				st.mu.Unlock()
			}
		case OpFetch:
			if !st.wait(deadline, func() bool { return st.handles[k] != nil }) {
				return fail(rref.InvariantL1, c.Line, "%s never got %s", c.W, c.X)
			}
			st.mu.Lock()
			r := st.handles[k]
			f := &rtFetch{}
			st.fetches[k] = f
			st.mu.Unlock()
			fut := r.Fetch(ctx) // issued now: a release on the next line comes after
			go func() {
				v, err := fut.Wait(ctx)
				st.mu.Lock()
				f.done, f.value, f.kind = true, v, errKind(err)
				st.mu.Unlock()
			}()
		case OpRelease:
			if !st.wait(deadline, has(k)) {
				return fail(rref.InvariantL1, c.Line, "%s never got %s", c.W, c.X)
			}
			st.mu.Lock()
			r := st.handles[k]
			st.gone[k] = true
			st.mu.Unlock()
			r.Release()
		case OpSettle:
			if !settle() {
				return fail(rref.InvariantL1, c.Line, "settle did not end")
			}
		case OpCrash:
			dead[c.W] = true
			w.Close()
		case OpExpect:
			switch c.Expect {
			case "value", "error", "either":
				var f *rtFetch
				if !st.wait(deadline, func() bool { f = st.fetches[k]; return f != nil && f.done }) {
					return fail(rref.InvariantL1, c.Line, "%s's fetch of %s never completed", c.W, c.X)
				}
				st.mu.Lock()
				got := fmt.Sprintf("value %d", f.value)
				if f.kind != "" {
					got = "error " + f.kind
				}
				okValue := f.kind == "" && int64(f.value) == c.Value
				okKind := f.kind == c.Kind
				st.mu.Unlock()
				if c.Expect == "value" && !okValue || c.Expect == "error" && !okKind || c.Expect == "either" && !okValue && !okKind {
					return fail("expect", c.Line, "%s's fetch of %s got %s", c.W, c.X, got)
				}
			case "count":
				if !settle() {
					return fail(rref.InvariantL1, c.Line, "the network did not settle")
				}
				d := w.DebugInfo()
				got := map[string]int{"owners": d.Owners, "forks": d.Forks, "pending_users": d.PendingUsers, "pending_children": d.PendingChildren}[c.Kind]
				if int64(got) != c.N {
					return fail("expect", c.Line, "%s: %s is %d, want %d", c.W, c.Kind, got, c.N)
				}
			case "clean":
				for _, x := range ws {
					if !dead[x.Name()] && !x.DebugInfo().Clean() {
						return fail("expect", c.Line, "%s is not clean: %+v", x.Name(), x.DebugInfo().Counters)
					}
				}
			}
		}
		st.mu.Lock()
		ferr := st.failed
		st.mu.Unlock()
		if ferr != nil {
			return fail(rref.InvariantL1, c.Line, "%v", ferr)
		}
	}
	// Every fetch must end (L1) with the value or its stored error (S4).
	for k, f := range st.fetches {
		if !st.wait(time.Now().Add(stepTimeout), func() bool { return f.done }) {
			return fail(rref.InvariantL1, 0, "the fetch of %s never completed", k)
		}
		if f.kind == "" && strconv.Itoa(f.value) != values[k] {
			return fail(rref.InvariantS4, 0, "the fetch of %s returned %d, want %s", k, f.value, values[k])
		}
		if f.kind == "user" && values[k] != "fail" {
			return fail(rref.InvariantS4, 0, "the fetch of %s raised a user error, but the function succeeded", k)
		}
	}
	// L2: once every handle on a live worker is released, nothing is left.
	all := true
	for k := range st.handles {
		w, _, _ := strings.Cut(k, "/")
		if !dead[w] && !st.gone[k] {
			all = false
		}
	}
	if !settle() {
		return fail(rref.InvariantL1, 0, "the network did not settle at the end")
	}
	if all {
		sctx, cancel := context.WithTimeout(context.Background(), stepTimeout)
		defer cancel()
		var live []*worker.Worker
		for _, w := range ws {
			if !dead[w.Name()] {
				live = append(live, w)
			}
		}
		if err := worker.ShutdownGroup(sctx, live); err != nil {
			return fail(rref.InvariantL2, 0, "%v", err)
		}
	}
	return nil
}
