package worker_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rrefkit/rref/runtime/worker"
)

// Errors that misled a newcomer (issue 34): each test fails on the code
// that misled and passes on the fix.

// Shutdown gives up after shutdownGivesUp, far longer than the barrier
// takes to settle when nothing runs.
const (
	shutdownGivesUp = 300 * time.Millisecond
	// testBound is far above anything here takes, far below forever.
	testBound = 10 * time.Second
)

// A nil *RRef, what a failed Remote returns, panicked in ToHere and in the
// deferred Release that typically follows. Every method now answers:
// ErrUnbound where it can fail, nothing where it reports.
func TestNilRRefMethodsReturnErrUnbound(t *testing.T) {
	ctx := context.Background()
	var r *worker.RRef[int]
	defer func() {
		if p := recover(); p != nil {
			t.Fatalf("a method of a nil *RRef panicked: %v", p)
		}
	}()
	if _, err := r.ToHere(ctx); !errors.Is(err, worker.ErrUnbound) {
		t.Errorf("ToHere: %v, want ErrUnbound", err)
	}
	if err := r.Release(); !errors.Is(err, worker.ErrUnbound) || !strings.Contains(err.Error(), "nil") {
		t.Errorf("Release: %v, want ErrUnbound saying the RRef is nil", err)
	}
	if _, err := r.Fetch(ctx).Wait(ctx); !errors.Is(err, worker.ErrUnbound) {
		t.Errorf("Fetch: %v", err)
	}
	if _, err := r.LocalValue(ctx); !errors.Is(err, worker.ErrUnbound) {
		t.Errorf("LocalValue: %v", err)
	}
	if _, err := r.Clone(); !errors.Is(err, worker.ErrUnbound) {
		t.Errorf("Clone: %v", err)
	}
	if r.Owner() != "" || r.IsOwner() || r.Confirmed() || r.Keep() != nil {
		t.Error("a nil RRef claims an owner, a confirmation or a reference kept")
	}
}

// Register("") was accepted, and NewGroup(nil) returned no workers and no
// error: both are mistakes a program should hear of at once.
func TestEmptyNamesAndGroupsRefused(t *testing.T) {
	for _, names := range [][]string{nil, {}} {
		ws, err := worker.NewGroup(names, worker.Config{})
		if err == nil || len(ws) != 0 || !strings.HasPrefix(err.Error(), "worker: ") {
			t.Errorf("NewGroup(%#v) = %d workers, %v; want an error", names, len(ws), err)
		}
	}
	if _, err := worker.Start(context.Background(), "A", nil, []byte("s"), worker.Config{}); err == nil {
		t.Error("Start with no peers: no error")
	}
	ws, err := worker.NewGroup([]string{"A", "B"}, worker.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer worker.ShutdownGroup(context.Background(), ws)
	id := func(ctx context.Context, x int) (int, error) { return x, nil }
	if err := worker.Register(ws[1], "", id); err == nil || !strings.Contains(err.Error(), "empty") {
		t.Errorf(`Register(""): %v, want an error naming the empty name`, err)
	}
	if err := worker.Register[int, int](ws[1], "nilfn", nil); err == nil {
		t.Error("Register of a nil function: no error")
	}
	if _, err := worker.Call[int](context.Background(), ws[0], "B", "", 1); !errors.Is(err, worker.ErrUnknownFunction) {
		t.Errorf(`a call of "" after the refused Register: %v, want ErrUnknownFunction`, err)
	}
}

// lockedBuffer is a log destination written by the workers' goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// explode panics two calls below the registered function, so that the
// frames carried must be more than the one that panicked.
func explode(ctx context.Context, n int) (int, error) { return detonate(n), nil }

func detonate(n int) int {
	var m map[int]int
	m[n] = n // a nil map: a runtime panic, which passes the runtime's own frames
	return n
}

// A panic in a registered function lost its stack (only "panic: ..." came
// back) and nothing logged it. The callee's logger now gets the whole
// stack, and the caller's error its first frames, from where it panicked.
func TestPanicStackLoggedAndCarried(t *testing.T) {
	var logs lockedBuffer
	ws, err := worker.NewGroup([]string{"A", "B"}, worker.Config{
		Logger: slog.New(slog.NewJSONHandler(&logs, nil)),
		Setup:  func(w *worker.Worker) { worker.Register(w, "explode", explode) },
	})
	if err != nil {
		t.Fatal(err)
	}
	defer worker.ShutdownGroup(context.Background(), ws)
	_, err = worker.Call[int](context.Background(), ws[0], "B", "explode", 7)
	var ue *worker.UserError
	if !errors.As(err, &ue) {
		t.Fatalf("a panicking function: %v, want a *UserError", err)
	}
	msg := err.Error()
	for _, want := range []string{"assignment to entry in nil map", "worker_test.detonate", "worker_test.explode", "misleading_test.go:"} {
		if !strings.Contains(msg, want) {
			t.Errorf("the caller's error does not carry %q:\n%s", want, msg)
		}
	}
	for _, noise := range []string{"runtime/debug", "callUser", "goroutine "} {
		if strings.Contains(msg, noise) {
			t.Errorf("the caller's error carries the runtime's frames (%q):\n%s", noise, msg)
		}
	}
	var rec struct{ Msg, Worker, Function, Panic, Stack string }
	for line := range strings.Lines(logs.String()) {
		if json.Unmarshal([]byte(line), &rec) == nil && strings.Contains(rec.Msg, "panic") {
			break
		}
		rec.Stack = ""
	}
	if rec.Worker != "B" || rec.Function != "explode" || !strings.Contains(rec.Panic, "nil map") ||
		!strings.Contains(rec.Stack, "worker_test.detonate") || !strings.Contains(rec.Stack, "goroutine ") {
		t.Errorf("the callee's log has no record of the panic with its stack:\n%s", logs.String())
	}
}

// A function that ignores its context blocks Shutdown, and the report said
// "1 frames from A to B not yet taken" (the call it runs counts as taken
// once it returns). It names the function now, its caller and since when:
// for a call, and for a Remote (whose value it names as being made).
func TestShutdownNamesFunctionsStillRunning(t *testing.T) {
	for _, remote := range []bool{false, true} {
		release := make(chan struct{})
		entered := make(chan struct{}, 1)
		ws, err := worker.NewGroup([]string{"A", "B"}, worker.Config{Logger: slog.New(slog.DiscardHandler), Setup: func(w *worker.Worker) {
			worker.Register(w, "stuck", func(ctx context.Context, _ int) (int, error) {
				entered <- struct{}{}
				<-release // ignores its context, as careless code does
				return 0, nil
			})
		}})
		if err != nil {
			t.Fatal(err)
		}
		began := time.Now()
		want := []string{"B runs 1 function", "function stuck, called by A, running since "}
		if remote {
			want = []string{"(not yet created: function stuck still running)", "function stuck, making the value of a Remote by A, running since "}
			r, err := worker.Remote[int](context.Background(), ws[0], "B", "stuck", 2)
			if err != nil {
				t.Fatal(err)
			}
			r.Release()
			<-entered
		} else {
			// The caller gives up once the function runs.
			cctx, cancel := context.WithCancel(context.Background())
			f := worker.Go[int](cctx, ws[0], "B", "stuck", 1)
			<-entered
			cancel()
			if _, err := f.Wait(context.Background()); !errors.Is(err, context.Canceled) {
				t.Fatalf("the call: %v", err)
			}
		}
		sctx, cancel := context.WithTimeout(context.Background(), shutdownGivesUp)
		err = worker.ShutdownGroup(sctx, ws)
		cancel()
		close(release) // for goleak: the abandoned function ends
		var le *worker.LeakError
		if !errors.As(err, &le) {
			t.Fatalf("Shutdown past its context with a function running: %v, want a LeakError", err)
		}
		t.Log(err)
		msg := err.Error()
		for _, w := range want {
			if !strings.Contains(msg, w) {
				t.Errorf("the report does not say %q:\n%s", w, msg)
			}
		}
		if strings.Contains(msg, "frames from A to B") {
			t.Errorf("the report blames frames in flight, not the function:\n%s", msg)
		}
		found := false
		for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
			if errors.As(e, &le) && le.Worker == "B" {
				found = len(le.Running) == 1
				for _, f := range le.Running {
					if f.Function != "stuck" || f.Caller != "A" || f.Remote != remote || f.Since.Before(began) || f.Since.After(time.Now()) {
						t.Errorf("the running function reported as %+v", f)
					}
				}
			}
		}
		if !found {
			t.Errorf("B's LeakError does not list the one running function:\n%s", msg)
		}
	}
}

// A call to a worker found dead said "call to worker 1": the core's index,
// which the program never used. Errors name the worker as the group does.
func TestErrorsNameWorkersByName(t *testing.T) {
	failed := make(chan string, 1)
	ws, err := worker.NewGroup([]string{"ps", "trainer"}, worker.Config{Logger: slog.New(slog.DiscardHandler),
		OnPeerFailed: func(peer string, _ error) { failed <- peer }})
	if err != nil {
		t.Fatal(err)
	}
	defer ws[1].Close()
	ws[0].Close()
	ctx := ctxFor(t)
	select {
	case <-failed:
	case <-ctx.Done():
		t.Fatal("trainer never saw ps fail")
	}
	_, err = worker.Call[int](ctx, ws[1], "ps", "f", 1)
	if !errors.Is(err, worker.ErrPeerFailed) || !strings.Contains(err.Error(), "call to ps") || strings.Contains(err.Error(), "worker 1") {
		t.Errorf("a call to a dead worker: %v, want it named ps", err)
	}
	_, err = worker.Remote[int](ctx, ws[1], "ps", "f", 1)
	if !errors.Is(err, worker.ErrPeerFailed) || !strings.Contains(err.Error(), "remote to ps") || strings.Contains(err.Error(), "worker 1") {
		t.Errorf("a Remote to a dead worker: %v, want it named ps", err)
	}
}

// ctxFor is a context that ends with the test, or after testBound.
func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), testBound)
	t.Cleanup(cancel)
	return ctx
}
