package worker_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rrefkit/rref/generated/rref"
	"github.com/rrefkit/rref/runtime/worker"
)

// interceptLog records, in order, what interceptors and functions saw.
type interceptLog struct {
	mu    sync.Mutex
	lines []string
}

func (l *interceptLog) add(format string, args ...any) {
	l.mu.Lock()
	l.lines = append(l.lines, fmt.Sprintf(format, args...))
	l.mu.Unlock()
}

func (l *interceptLog) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.lines
	l.lines = nil
	return out
}

func logServer(l *interceptLog, name string) worker.ServerInterceptor {
	return func(ctx context.Context, info worker.CallInfo, h worker.ServerHandler) error {
		l.add("%s server %s %s on %s from %s", name, info.Kind, info.Function, info.Worker, info.Peer)
		err := h(ctx)
		l.add("%s server done %v", name, err)
		return err
	}
}

func logClient(l *interceptLog, name string) worker.ClientInterceptor {
	return func(ctx context.Context, info worker.CallInfo, inv worker.Invoker) error {
		l.add("%s client %s %s from %s to %s", name, info.Kind, info.Function, info.Worker, info.Peer)
		err := inv(ctx)
		l.add("%s client done %v", name, err)
		return err
	}
}

// interceptGroup is A and B with cfg's interceptors and a function "add"
// on B that logs its run.
func interceptGroup(t *testing.T, l *interceptLog, cfg worker.Config) []*worker.Worker {
	t.Helper()
	cfg.Setup = func(w *worker.Worker) {
		worker.Register(w, "add", func(ctx context.Context, x [2]int) (int, error) {
			l.add("add runs on %s", w.Name())
			return x[0] + x[1], nil
		})
	}
	ws, err := worker.NewGroup([]string{"A", "B"}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { worker.ShutdownGroup(context.Background(), ws) })
	return ws
}

// TestInterceptorsRunInOrderForEveryKind: the first interceptor of a list
// is the outermost, on both sides, and every kind of call passes them: a
// Call, a Go, a Remote (the owner's side around the function's run) and a
// fetch of its value (ToHere and Fetch: the caller's side only, as the
// owner runs no function for it), each described by kind, function and
// both members' names.
func TestInterceptorsRunInOrderForEveryKind(t *testing.T) {
	l := &interceptLog{}
	ws := interceptGroup(t, l, worker.Config{
		ServerInterceptors: []worker.ServerInterceptor{logServer(l, "s1"), logServer(l, "s2")},
		ClientInterceptors: []worker.ClientInterceptor{logClient(l, "c1"), logClient(l, "c2")},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	a := ws[0]
	call := []string{
		"c1 client call add from A to B", "c2 client call add from A to B",
		"s1 server call add on B from A", "s2 server call add on B from A",
		"add runs on B",
		"s2 server done <nil>", "s1 server done <nil>",
		"c2 client done <nil>", "c1 client done <nil>",
	}

	if v, err := worker.Call[int](ctx, a, "B", "add", [2]int{1, 2}); err != nil || v != 3 {
		t.Fatalf("Call: %d %v", v, err)
	}
	wantLog(t, "Call", l.take(), call)

	if v, err := worker.Go[int](ctx, a, "B", "add", [2]int{1, 2}).Wait(ctx); err != nil || v != 3 {
		t.Fatalf("Go: %d %v", v, err)
	}
	wantLog(t, "Go", l.take(), call)

	r, err := worker.Remote[int](ctx, a, "B", "add", [2]int{3, 4})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Release()
	if v, err := r.ToHere(ctx); err != nil || v != 7 {
		t.Fatalf("ToHere: %d %v", v, err)
	}
	got := l.take()
	// The Remote's client side ends once it is sent, while the owner runs
	// the function: the two sides interleave, each in its own order.
	wantLog(t, "Remote (caller)", only(got, "client"), []string{
		"c1 client remote add from A to B", "c2 client remote add from A to B", "c2 client done <nil>", "c1 client done <nil>",
		"c1 client fetch add from A to B", "c2 client fetch add from A to B", "c2 client done <nil>", "c1 client done <nil>",
	})
	wantLog(t, "Remote (owner)", only(got, "server", "runs"), []string{
		"s1 server remote add on B from A", "s2 server remote add on B from A", "add runs on B",
		"s2 server done <nil>", "s1 server done <nil>",
	})

	if v, err := r.Fetch(ctx).Wait(ctx); err != nil || v != 7 {
		t.Fatalf("Fetch: %d %v", v, err)
	}
	wantLog(t, "Fetch", l.take(), []string{
		"c1 client fetch add from A to B", "c2 client fetch add from A to B", "c2 client done <nil>", "c1 client done <nil>",
	})
}

func only(lines []string, words ...string) []string {
	var out []string
	for _, line := range lines {
		for _, w := range words {
			if strings.Contains(line, " "+w) {
				out = append(out, line)
				break
			}
		}
	}
	return out
}

func wantLog(t *testing.T, what string, got, want []string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("%s:\ngot  %q\nwant %q", what, got, want)
	}
}

var errDenied = errors.New("app: denied")

// TestInterceptorsFailCalls: an interceptor that fails a call instead of
// running it gives the caller its error (a server interceptor's crosses
// the wire and matches errors.Is through Config.Errors), and the function
// does not run; one that fails a call after it ran replaces its result;
// one that returns nil without running the call fails it with ErrNotRun
// rather than let the caller take a zero value for a result; a panic in a
// server interceptor fails only that call.
func TestInterceptorsFailCalls(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var policy sync.Map // function name -> what the interceptors do with it
	server := func(ctx context.Context, info worker.CallInfo, h worker.ServerHandler) error {
		switch v, _ := policy.Load("server " + info.Function); v {
		case "deny":
			return fmt.Errorf("%s from %s: %w", info.Function, info.Peer, errDenied)
		case "after":
			if err := h(ctx); err != nil {
				return err
			}
			return errDenied
		case "skip":
			return nil
		case "panic":
			panic("interceptor bug")
		}
		return h(ctx)
	}
	client := func(ctx context.Context, info worker.CallInfo, inv worker.Invoker) error {
		switch v, _ := policy.Load("client " + info.Function); v {
		case "deny":
			return errDenied
		case "skip":
			return nil
		}
		return inv(ctx)
	}
	l := &interceptLog{}
	ws := interceptGroup(t, l, worker.Config{Errors: []error{errDenied},
		ServerInterceptors: []worker.ServerInterceptor{server}, ClientInterceptors: []worker.ClientInterceptor{client}})
	a := ws[0]
	// ErrNotRun on the callee crosses the wire as the callee's failure,
	// a *UserError that says so: only Config.Errors keep their identity.
	notRunThere := func(err error) bool {
		var ue *worker.UserError
		return errors.As(err, &ue) && ue.Worker == "B" && strings.Contains(ue.Message, worker.ErrNotRun.Error())
	}
	is := func(want error) func(error) bool { return func(err error) bool { return errors.Is(err, want) } }
	for _, tc := range []struct {
		policy string
		want   func(error) bool
		runs   bool
	}{
		{"server deny", is(errDenied), false},
		{"server after", is(errDenied), true},
		{"server skip", notRunThere, false},
		{"client deny", is(errDenied), false},
		{"client skip", is(worker.ErrNotRun), false},
	} {
		side, what, _ := strings.Cut(tc.policy, " ")
		policy.Store(side+" add", what)
		_, err := worker.Call[int](ctx, a, "B", "add", [2]int{1, 2})
		if !tc.want(err) {
			t.Errorf("%s: Call: %v", tc.policy, err)
		}
		_, goErr := worker.Go[int](ctx, a, "B", "add", [2]int{1, 2}).Wait(ctx)
		if !tc.want(goErr) {
			t.Errorf("%s: Go: %v", tc.policy, goErr)
		}
		if ran := len(l.take()) > 0; ran != tc.runs {
			t.Errorf("%s: the function ran: %v, want %v", tc.policy, ran, tc.runs)
		}
		policy.Delete(side + " add")
	}

	// A Remote refused by the caller's interceptor makes nothing; one
	// failed on the owner stores the failure for its fetches.
	policy.Store("client add", "deny")
	if r, err := worker.Remote[int](ctx, a, "B", "add", [2]int{1, 2}); !errors.Is(err, errDenied) || r != nil {
		t.Errorf("Remote denied by the caller: %v %v", r, err)
	}
	policy.Delete("client add")
	policy.Store("server add", "deny")
	r, err := worker.Remote[int](ctx, a, "B", "add", [2]int{1, 2})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.ToHere(ctx); !errors.Is(err, errDenied) {
		t.Errorf("Remote denied by the owner: ToHere: %v", err)
	}
	r.Release()

	policy.Store("server add", "panic")
	if _, err := worker.Call[int](ctx, a, "B", "add", [2]int{1, 2}); err == nil || !strings.Contains(err.Error(), "interceptor bug") {
		t.Errorf("a server interceptor's panic: %v", err)
	}
	policy.Delete("server add")
	if v, err := worker.Call[int](ctx, a, "B", "add", [2]int{1, 2}); err != nil || v != 3 {
		t.Errorf("after the panic: %d %v", v, err)
	}
}

// TestServerInterceptorsSeeFailuresByKind: a server interceptor sees
// every run, also those that fail before the function: ErrorKindOf names
// their kind as the wire does, and a function's own error is user even
// when it wraps a sentinel of a call it made.
func TestServerInterceptorsSeeFailuresByKind(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	kinds := make(chan rref.ErrorKind, 8)
	ws, err := worker.NewGroup([]string{"A", "B"}, worker.Config{
		Setup: func(w *worker.Worker) {
			worker.Register(w, "nested", func(ctx context.Context, x int) (int, error) {
				return worker.Call[int](ctx, w, "A", "missing", x)
			})
			worker.Register(w, "slow", func(ctx context.Context, x int) (int, error) {
				<-ctx.Done()
				return 0, ctx.Err()
			})
		},
		ServerInterceptors: []worker.ServerInterceptor{func(ctx context.Context, info worker.CallInfo, h worker.ServerHandler) error {
			err := h(ctx)
			if info.Worker == "B" { // not A's run of the call nested makes
				kinds <- worker.ErrorKindOf(err)
			}
			return err
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer worker.ShutdownGroup(ctx, ws)
	a := ws[0]
	for _, tc := range []struct {
		call func() error
		want rref.ErrorKind
	}{
		{func() error { _, err := worker.Call[int](ctx, a, "B", "missing", 1); return err }, rref.ErrorKindUnknownFunction},
		{func() error { _, err := worker.Call[string](ctx, a, "B", "nested", 1); return err }, rref.ErrorKindTypeMismatch},
		{func() error { _, err := worker.Call[int](ctx, a, "B", "nested", 1); return err }, rref.ErrorKindUser},
		{func() error {
			short, stop := context.WithTimeout(ctx, 50*time.Millisecond)
			defer stop()
			_, err := worker.Call[int](short, a, "B", "slow", 1)
			return err
		}, rref.ErrorKindDeadlineExceeded},
	} {
		err := tc.call()
		if got := <-kinds; got != tc.want {
			t.Errorf("callee saw %v for %v, want %v", got, err, tc.want)
		}
		// The caller classifies what it got the same way.
		if got := worker.ErrorKindOf(err); got != tc.want {
			t.Errorf("caller's kind of %v: %v, want %v", err, got, tc.want)
		}
	}
}

// TestErrorKindOf: the package's errors map to the kinds the wire carries.
func TestErrorKindOf(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want rref.ErrorKind
	}{
		{nil, rref.ErrorKindNone},
		{fmt.Errorf("call: %w", context.DeadlineExceeded), rref.ErrorKindDeadlineExceeded},
		{context.Canceled, rref.ErrorKindCancelled},
		{fmt.Errorf("%w: f", worker.ErrUnknownFunction), rref.ErrorKindUnknownFunction},
		{worker.ErrTypeMismatch, rref.ErrorKindTypeMismatch},
		{worker.ErrCodec, rref.ErrorKindCodec},
		{worker.ErrTooLarge, rref.ErrorKindTooLarge},
		{worker.ErrTimeout, rref.ErrorKindTimeout},
		{worker.ErrDeleted, rref.ErrorKindDeleted},
		{worker.ErrLost, rref.ErrorKindLost},
		{worker.ErrOwnerFailed, rref.ErrorKindOwnerFailed},
		{worker.ErrPeerFailed, rref.ErrorKindOwnerFailed},
		{worker.ErrClosed, rref.ErrorKindOwnerFailed},
		{worker.ErrUnknownWorker, rref.ErrorKindBadRequest},
		{worker.ErrMetadataTooLarge, rref.ErrorKindBadRequest},
		{&worker.UserError{Function: "f", Worker: "B", Message: "m"}, rref.ErrorKindUser},
		{errDenied, rref.ErrorKindUser},
	} {
		if got := worker.ErrorKindOf(tc.err); got != tc.want {
			t.Errorf("ErrorKindOf(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

// TestMetadataTravelsWithTheCall: metadata added to the caller's context,
// by the program or a client interceptor, reaches the function's context
// and the server interceptors' through a Call, a Go and a Remote, and is
// not sent on by a call the function makes in turn; metadata over its
// bound is refused before anything leaves.
func TestMetadataTravelsWithTheCall(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	seen := make(chan string, 16)
	show := func(md worker.Metadata) string {
		var kv []string
		for k, v := range md {
			kv = append(kv, k+"="+v)
		}
		slices.Sort(kv)
		return strings.Join(kv, ",")
	}
	ws, err := worker.NewGroup([]string{"A", "B", "C"}, worker.Config{
		Setup: func(w *worker.Worker) {
			worker.Register(w, "show", func(ctx context.Context, next string) (string, error) {
				seen <- w.Name() + " fn " + show(worker.IncomingMetadata(ctx))
				if next != "" {
					return worker.Call[string](ctx, w, next, "show", "")
				}
				return "", nil
			})
		},
		ServerInterceptors: []worker.ServerInterceptor{func(ctx context.Context, info worker.CallInfo, h worker.ServerHandler) error {
			seen <- info.Worker + " interceptor " + show(worker.IncomingMetadata(ctx))
			return h(ctx)
		}},
		ClientInterceptors: []worker.ClientInterceptor{func(ctx context.Context, info worker.CallInfo, inv worker.Invoker) error {
			if info.Worker == "A" {
				ctx = worker.WithOutgoingMetadata(ctx, worker.Metadata{"by": "interceptor"})
			}
			return inv(ctx)
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer worker.ShutdownGroup(ctx, ws)
	a := ws[0]
	mctx := worker.WithOutgoingMetadata(ctx, worker.Metadata{"tenant": "t1", "by": "program"})
	want := []string{"B interceptor by=interceptor,tenant=t1", "B fn by=interceptor,tenant=t1", "C interceptor ", "C fn "}
	takeSeen := func(what string, n int) {
		t.Helper()
		var got []string
		for range n {
			got = append(got, <-seen)
		}
		wantLog(t, what, got, want[:n])
	}
	if _, err := worker.Call[string](mctx, a, "B", "show", "C"); err != nil {
		t.Fatal(err)
	}
	takeSeen("Call", 4)
	if _, err := worker.Go[string](mctx, a, "B", "show", "").Wait(ctx); err != nil {
		t.Fatal(err)
	}
	takeSeen("Go", 2)
	r, err := worker.Remote[string](mctx, a, "B", "show", "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.ToHere(ctx); err != nil {
		t.Fatal(err)
	}
	r.Release()
	takeSeen("Remote", 2)
	if md := worker.OutgoingMetadata(mctx); show(md) != "by=program,tenant=t1" {
		t.Errorf("the caller's metadata changed: %v", md)
	}

	big := worker.Metadata{}
	for i := range 65 {
		big[fmt.Sprint("k", i)] = "v"
	}
	if _, err := worker.Call[string](worker.WithOutgoingMetadata(ctx, big), a, "B", "show", ""); !errors.Is(err, worker.ErrMetadataTooLarge) {
		t.Errorf("65 entries: %v", err)
	}
	long := worker.WithOutgoingMetadata(ctx, worker.Metadata{"k": strings.Repeat("x", 8192)})
	if _, err := worker.Remote[string](long, a, "B", "show", ""); !errors.Is(err, worker.ErrMetadataTooLarge) {
		t.Errorf("8 KiB of metadata: %v", err)
	}
	if len(seen) != 0 {
		t.Errorf("a refused call ran: %s", <-seen)
	}
}

// TestNilInterceptorIsRefused: a nil interceptor in a Config would fail
// every call; the group is refused instead, naming it.
func TestNilInterceptorIsRefused(t *testing.T) {
	_, err := worker.NewGroup([]string{"A"}, worker.Config{ClientInterceptors: []worker.ClientInterceptor{nil}})
	if err == nil || !strings.Contains(err.Error(), "ClientInterceptors[0]") {
		t.Fatalf("NewGroup: %v", err)
	}
}
