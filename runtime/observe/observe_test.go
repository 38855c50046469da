package observe_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/rrefkit/rref/runtime/observe"
	"github.com/rrefkit/rref/runtime/worker"
)

// TestServe: the listener serves the worker's metrics, its debug counters
// and pprof, and stops with its context.
func TestServe(t *testing.T) {
	defer goleak.VerifyNone(t)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	ws, err := worker.NewGroup([]string{"A", "B"}, worker.Config{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	worker.Register(ws[1], "add", func(ctx context.Context, x [2]int) (int, error) { return x[0] + x[1], nil })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	dctx, stop := context.WithCancel(ctx)
	addr, err := observe.Serve(dctx, ws[0], "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r, err := worker.Remote[int](ctx, ws[0], "B", "add", [2]int{1, 2})
	if err != nil {
		t.Fatal(err)
	}
	if v, err := r.ToHere(ctx); err != nil || v != 3 {
		t.Fatalf("%d %v", v, err)
	}
	r.Release()
	get := func(path string) string {
		resp, err := http.Get("http://" + addr.String() + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	m := get("/metrics")
	for _, want := range []string{`rref_messages_total{direction="out",type="RemoteCall"} 1`, `rref_messages_total{direction="in",type="FetchRet"} 1`,
		"rref_fetch_seconds_count 1", `rref_fetch_seconds_bucket{le="+Inf"} 1`, "rref_credit_stalls_total", "rref_transport_parks_total",
		"rref_transport_wakeups_total", "rref_inline_handoffs_total", "rref_inline_overruns_total", "rref_owners 0"} {
		if !strings.Contains(m, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if d := get("/debug/rref"); !strings.Contains(d, `"MessagesSent"`) {
		t.Errorf("/debug/rref: %s", d)
	}
	if p := get("/debug/pprof/"); !strings.Contains(p, "goroutine") {
		t.Error("/debug/pprof/ missing")
	}
	stop()
	if err := worker.ShutdownGroup(ctx, ws); err != nil {
		t.Fatal(err)
	}
	// The listener is gone with its context.
	if !stopsServing(addr.String()) {
		t.Fatal("the listener outlived its context")
	}
	http.DefaultClient.CloseIdleConnections()
}

// stopsServing reports whether the listener at addr stops serving within
// a bound generous for a loaded host: it stops on its own goroutine.
func stopsServing(addr string) bool {
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			return true
		}
		resp.Body.Close()
		if time.Now().After(deadline) {
			return false
		}
	}
}
