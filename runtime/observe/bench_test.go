package observe_test

import (
	"context"
	"io"
	"log/slog"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/rrefkit/rref/runtime/observe"
	"github.com/rrefkit/rref/runtime/worker"
)

// BenchmarkCallInterceptors is what observing calls costs: a Call over mem
// (the transport that costs least, so the interceptors' share shows most)
// with no interceptor, with CallMetrics, with Tracing (every span sampled
// and recorded by the SDK, exported nowhere), and with both, on both ends.
// Compare the sub-benchmarks of one run: ns/op and allocs/op are their cost.
func BenchmarkCallInterceptors(b *testing.B) {
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()))
	b.Cleanup(func() { tp.Shutdown(context.Background()) })
	m, tr := observe.NewCallMetrics(), observe.NewTracing(tp, nil)
	for _, bc := range []struct {
		name   string
		server []worker.ServerInterceptor
		client []worker.ClientInterceptor
	}{
		{"none", nil, nil},
		{"metrics", []worker.ServerInterceptor{m.ServerInterceptor()}, []worker.ClientInterceptor{m.ClientInterceptor()}},
		{"tracing", []worker.ServerInterceptor{tr.ServerInterceptor()}, []worker.ClientInterceptor{tr.ClientInterceptor()}},
		{"both", []worker.ServerInterceptor{tr.ServerInterceptor(), m.ServerInterceptor()},
			[]worker.ClientInterceptor{tr.ClientInterceptor(), m.ClientInterceptor()}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
			ws, err := worker.NewGroup([]string{"server", "client"}, worker.Config{Logger: quiet,
				ServerInterceptors: bc.server, ClientInterceptors: bc.client})
			if err != nil {
				b.Fatal(err)
			}
			defer func() { ws[1].Close(); ws[0].Close() }()
			worker.Register(ws[0], "add", func(ctx context.Context, x [2]int64) (int64, error) { return x[0] + x[1], nil })
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if _, err := worker.Call[int64](ctx, ws[1], "server", "add", [2]int64{1, 2}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
