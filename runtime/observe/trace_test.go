package observe_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/goleak"

	"github.com/rrefkit/rref/runtime/observe"
	"github.com/rrefkit/rref/runtime/worker"
)

// tracedGroup is A, B and C over mem with tracing on every worker, and the
// README's functions: "add" and "fail" on B, "double" on C, which fetches
// its RRef argument from the owner.
func tracedGroup(t *testing.T, tp trace.TracerProvider) []*worker.Worker {
	t.Helper()
	tr := observe.NewTracing(tp, nil)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	ws, err := worker.NewGroup([]string{"A", "B", "C"}, worker.Config{Logger: quiet,
		ServerInterceptors: []worker.ServerInterceptor{tr.ServerInterceptor()},
		ClientInterceptors: []worker.ClientInterceptor{tr.ClientInterceptor()},
		Setup: func(w *worker.Worker) {
			worker.Register(w, "add", func(ctx context.Context, x [2]int) (int, error) { return x[0] + x[1], nil })
			worker.Register(w, "fail", func(ctx context.Context, x int) (int, error) { return 0, errDenied })
			worker.Register(w, "double", func(ctx context.Context, r *worker.RRef[int]) (int, error) {
				v, err := r.ToHere(ctx) // from the owner, B
				return 2 * v, err
			})
		}})
	if err != nil {
		t.Fatal(err)
	}
	return ws
}

// TestTraceFollowsAnRRefToAThirdMember is issue 34's acceptance test: A
// makes a value on B (Remote) and passes the RRef to C (Call), whose
// function fetches it from B. The trace holds, under A's own span, A's
// Remote and B's run of its function, A's call and C's run of it, and C's
// fetch from the owner: one trace, each span the child of the one that
// caused it.
func TestTraceFollowsAnRRefToAThirdMember(t *testing.T) {
	defer goleak.VerifyNone(t)
	sr := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr))
	defer tp.Shutdown(context.Background())
	ws := tracedGroup(t, tp)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	rctx, root := tp.Tracer("test").Start(ctx, "request")
	r, err := worker.Remote[int](rctx, ws[0], "B", "add", [2]int{1, 2})
	if err != nil {
		t.Fatal(err)
	}
	d, err := worker.Call[int](rctx, ws[0], "C", "double", r)
	if err != nil || d != 6 {
		t.Fatalf("double: %d %v", d, err)
	}
	r.Release()
	root.End()
	if err := worker.ShutdownGroup(ctx, ws); err != nil { // every function has returned: its span ended
		t.Fatal(err)
	}

	spans := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range sr.Ended() {
		key := s.Name() + " on " + attr(s, "rref.worker")
		if _, dup := spans[key]; dup {
			t.Errorf("two spans %q", key)
		}
		spans[key] = s
	}
	want := []struct {
		span, parent string
		kind         trace.SpanKind
		peer         string
	}{
		{"remote add on A", "request on ", trace.SpanKindClient, "B"},
		{"remote add on B", "remote add on A", trace.SpanKindServer, "A"},
		{"call double on A", "request on ", trace.SpanKindClient, "C"},
		{"call double on C", "call double on A", trace.SpanKindServer, "A"},
		{"fetch on C", "call double on C", trace.SpanKindClient, "B"}, // C did not make the Remote: it does not know the function
	}
	if len(spans) != len(want)+1 {
		var names []string
		for k := range spans {
			names = append(names, k)
		}
		t.Errorf("spans %q, want the root and %d", names, len(want))
	}
	traceID := root.SpanContext().TraceID()
	for _, w := range want {
		s, ok := spans[w.span]
		if !ok {
			t.Errorf("no span %q", w.span)
			continue
		}
		p := spans[w.parent]
		if s.SpanContext().TraceID() != traceID {
			t.Errorf("%q is in trace %v, not the caller's %v", w.span, s.SpanContext().TraceID(), traceID)
		}
		if p == nil || s.Parent().SpanID() != p.SpanContext().SpanID() {
			t.Errorf("%q's parent is %v, want %q", w.span, s.Parent().SpanID(), w.parent)
		}
		if s.SpanKind() != w.kind || attr(s, "rref.peer") != w.peer || attr(s, "rpc.system") != "rref" {
			t.Errorf("%q: kind %v, peer %q, system %q", w.span, s.SpanKind(), attr(s, "rref.peer"), attr(s, "rpc.system"))
		}
		if s.Status().Code == codes.Error {
			t.Errorf("%q failed: %s", w.span, s.Status().Description)
		}
	}
	if s := spans["remote add on B"]; s != nil && s.EndTime().Before(s.StartTime()) {
		t.Error("B's span ended before it began")
	}
}

// TestTraceRecordsFailures: a failed call's spans, on both sides, say it
// failed and of what kind; a call made with no span in its context starts
// a trace, which its callee's span joins.
func TestTraceRecordsFailures(t *testing.T) {
	defer goleak.VerifyNone(t)
	sr := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr))
	defer tp.Shutdown(context.Background())
	ws := tracedGroup(t, tp)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := worker.Call[int](ctx, ws[0], "B", "fail", 1); !errors.Is(err, errDenied) && !strings.Contains(err.Error(), "denied") {
		t.Fatalf("fail: %v", err)
	}
	if err := worker.ShutdownGroup(ctx, ws); err != nil {
		t.Fatal(err)
	}
	ended := sr.Ended()
	if len(ended) != 2 {
		t.Fatalf("%d spans, want the client's and the server's", len(ended))
	}
	client, server := ended[0], ended[1]
	if client.SpanKind() != trace.SpanKindClient {
		client, server = server, client
	}
	if server.Parent().SpanID() != client.SpanContext().SpanID() || server.SpanContext().TraceID() != client.SpanContext().TraceID() {
		t.Error("the callee's span is not the caller's child")
	}
	for _, s := range ended {
		if s.Status().Code != codes.Error || attr(s, "rref.error_kind") != "user" || !strings.Contains(s.Status().Description, "denied") {
			t.Errorf("%s on %s: status %v %q, error kind %q", s.Name(), attr(s, "rref.worker"), s.Status().Code, s.Status().Description, attr(s, "rref.error_kind"))
		}
		if len(s.Events()) != 1 || s.Events()[0].Name != "exception" {
			t.Errorf("%s on %s: events %v, want the error recorded", s.Name(), attr(s, "rref.worker"), s.Events())
		}
	}
}

func attr(s sdktrace.ReadOnlySpan, key string) string {
	for _, kv := range s.Attributes() {
		if kv.Key == attribute.Key(key) {
			return kv.Value.AsString()
		}
	}
	return ""
}
