package observe_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"

	"github.com/rrefkit/rref/runtime/observe"
	"github.com/rrefkit/rref/runtime/worker"
)

var errDenied = errors.New("app: denied")

// TestCallMetricsCountKnownCalls: after a known set of calls, Remotes and
// fetches, each series holds exactly their number, on the caller's side
// and the callee's, failures by their wire kind on both.
func TestCallMetricsCountKnownCalls(t *testing.T) {
	defer goleak.VerifyNone(t)
	m := observe.NewCallMetrics()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	ws, err := worker.NewGroup([]string{"A", "B"}, worker.Config{Logger: quiet,
		ServerInterceptors: []worker.ServerInterceptor{m.ServerInterceptor()},
		ClientInterceptors: []worker.ClientInterceptor{m.ClientInterceptor()},
		Setup: func(w *worker.Worker) {
			worker.Register(w, "add", func(ctx context.Context, x [2]int) (int, error) { return x[0] + x[1], nil })
			worker.Register(w, "deny", func(ctx context.Context, x int) (int, error) { return 0, errDenied })
			worker.Register(w, "slow", func(ctx context.Context, x int) (int, error) {
				<-ctx.Done()
				return 0, ctx.Err()
			})
		}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	a := ws[0]
	for range 3 {
		if _, err := worker.Call[int](ctx, a, "B", "add", [2]int{1, 2}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := worker.Call[int](ctx, a, "B", "deny", 1); err == nil {
		t.Fatal("deny succeeded")
	}
	if _, err := worker.Call[int](ctx, a, "B", "missing", 1); !errors.Is(err, worker.ErrUnknownFunction) {
		t.Fatal(err)
	}
	short, stop := context.WithTimeout(ctx, 20*time.Millisecond)
	if _, err := worker.Call[int](short, a, "B", "slow", 1); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatal(err)
	}
	stop()
	r, err := worker.Remote[int](ctx, a, "B", "add", [2]int{3, 4})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if v, err := r.ToHere(ctx); err != nil || v != 7 {
			t.Fatal(v, err)
		}
	}
	r.Release()
	// The barrier waits for every function: the callee's counts are in.
	if err := worker.ShutdownGroup(ctx, ws); err != nil {
		t.Fatal(err)
	}

	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(m)
	const want = `
# HELP rref_call_errors_total Calls that failed, by function and kind of failure (the wire's ErrorKind).
# TYPE rref_call_errors_total counter
rref_call_errors_total{error="deadline_exceeded",function="slow",kind="call",side="client",worker="A"} 1
rref_call_errors_total{error="deadline_exceeded",function="slow",kind="call",side="server",worker="B"} 1
rref_call_errors_total{error="unknown_function",function="missing",kind="call",side="client",worker="A"} 1
rref_call_errors_total{error="unknown_function",function="missing",kind="call",side="server",worker="B"} 1
rref_call_errors_total{error="user",function="deny",kind="call",side="client",worker="A"} 1
rref_call_errors_total{error="user",function="deny",kind="call",side="server",worker="B"} 1
# HELP rref_calls_total Calls, Remotes and fetches made (side client) and functions run for peers (side server), by function.
# TYPE rref_calls_total counter
rref_calls_total{function="add",kind="call",side="client",worker="A"} 3
rref_calls_total{function="add",kind="call",side="server",worker="B"} 3
rref_calls_total{function="add",kind="fetch",side="client",worker="A"} 2
rref_calls_total{function="add",kind="remote",side="client",worker="A"} 1
rref_calls_total{function="add",kind="remote",side="server",worker="B"} 1
rref_calls_total{function="deny",kind="call",side="client",worker="A"} 1
rref_calls_total{function="deny",kind="call",side="server",worker="B"} 1
rref_calls_total{function="missing",kind="call",side="client",worker="A"} 1
rref_calls_total{function="missing",kind="call",side="server",worker="B"} 1
rref_calls_total{function="slow",kind="call",side="client",worker="A"} 1
rref_calls_total{function="slow",kind="call",side="server",worker="B"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "rref_calls_total", "rref_call_errors_total"); err != nil {
		t.Error(err)
	}
	for _, tc := range []struct {
		labels string
		want   uint64
	}{
		{`function="add",kind="call",side="client",worker="A"`, 3},
		{`function="add",kind="call",side="server",worker="B"`, 3},
		{`function="add",kind="fetch",side="client",worker="A"`, 2},
	} {
		if got := histogramCount(t, reg, "rref_call_duration_seconds", tc.labels); got != tc.want {
			t.Errorf("latency {%s}: %d observations, want %d", tc.labels, got, tc.want)
		}
	}
}

// histogramCount is the number of observations of the histogram name's
// series whose labels, written as in the exposition format, are labels.
func histogramCount(t *testing.T, g prometheus.Gatherer, name, labels string) uint64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, metric := range mf.GetMetric() {
			var kv []string
			for _, lp := range metric.GetLabel() { // sorted by name
				kv = append(kv, fmt.Sprintf("%s=%q", lp.GetName(), lp.GetValue()))
			}
			if strings.Join(kv, ",") == labels {
				return metric.GetHistogram().GetSampleCount()
			}
		}
	}
	return 0
}

// TestServeServesCallMetrics: Serve's /metrics serves the collectors it is
// given beside the worker's own.
func TestServeServesCallMetrics(t *testing.T) {
	defer goleak.VerifyNone(t)
	m := observe.NewCallMetrics()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	ws, err := worker.NewGroup([]string{"A", "B"}, worker.Config{Logger: quiet,
		ClientInterceptors: []worker.ClientInterceptor{m.ClientInterceptor()},
		Setup: func(w *worker.Worker) {
			worker.Register(w, "add", func(ctx context.Context, x [2]int) (int, error) { return x[0] + x[1], nil })
		}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	addr, err := observe.Serve(ctx, ws[0], "127.0.0.1:0", observe.Collectors(m))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := worker.Call[int](ctx, ws[0], "B", "add", [2]int{1, 2}); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get("http://" + addr.String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`rref_calls_total{function="add",kind="call",side="client",worker="A"} 1`,
		`rref_call_duration_seconds_count{function="add",kind="call",side="client",worker="A"} 1`, "rref_messages_total"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	cancel()
	if err := worker.ShutdownGroup(context.Background(), ws); err != nil {
		t.Fatal(err)
	}
	if !stopsServing(addr.String()) {
		t.Fatal("the listener outlived its context")
	}
	http.DefaultClient.CloseIdleConnections()
}
