package observe

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rrefkit/rref/runtime/worker"
)

// CallMetrics counts calls by function, on both sides of each, through the
// worker's interceptors: calls, failures by kind (worker.ErrorKindOf: the
// kind the wire carries) and latency. Install its interceptors in the
// Config of the workers to measure, and serve it with them (Serve's
// collectors, or a registry of the program's own: it is a
// prometheus.Collector). One CallMetrics may serve several workers of a
// process: each series names its worker.
//
// Labels: worker (this worker), side (client: the caller; server: the
// callee), kind (call, remote, fetch), function (a fetch's is empty
// unless the fetching worker made the Remote). Peers are not a label, so
// that a series' count stays one per function and not one per member.
type CallMetrics struct {
	calls    *prometheus.CounterVec
	errors   *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

// Label values of side.
const (
	sideClient = "client"
	sideServer = "server"
)

// NewCallMetrics makes the metrics, not yet registered anywhere.
func NewCallMetrics() *CallMetrics {
	labels := []string{"worker", "side", "kind", "function"}
	return &CallMetrics{
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "rref_calls_total",
			Help: "Calls, Remotes and fetches made (side client) and functions run for peers (side server), by function."}, labels),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "rref_call_errors_total",
			Help: "Calls that failed, by function and kind of failure (the wire's ErrorKind)."}, append(labels, "error")),
		// The fetch histogram's buckets: the same calls, from shared memory
		// to a slow network.
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "rref_call_duration_seconds",
			Help:    "Call latency: the caller's until its result (a Remote's: until sent), the callee's the function's run.",
			Buckets: worker.FetchBuckets}, labels),
	}
}

// Describe implements prometheus.Collector.
func (m *CallMetrics) Describe(ch chan<- *prometheus.Desc) {
	m.calls.Describe(ch)
	m.errors.Describe(ch)
	m.duration.Describe(ch)
}

// Collect implements prometheus.Collector.
func (m *CallMetrics) Collect(ch chan<- prometheus.Metric) {
	m.calls.Collect(ch)
	m.errors.Collect(ch)
	m.duration.Collect(ch)
}

// ServerInterceptor counts the functions a worker runs for its peers.
func (m *CallMetrics) ServerInterceptor() worker.ServerInterceptor {
	return func(ctx context.Context, info worker.CallInfo, h worker.ServerHandler) error {
		start := time.Now()
		err := h(ctx)
		m.observe(sideServer, info, time.Since(start), err)
		return err
	}
}

// ClientInterceptor counts the calls, Remotes and fetches a worker makes.
func (m *CallMetrics) ClientInterceptor() worker.ClientInterceptor {
	return func(ctx context.Context, info worker.CallInfo, inv worker.Invoker) error {
		start := time.Now()
		err := inv(ctx)
		m.observe(sideClient, info, time.Since(start), err)
		return err
	}
}

func (m *CallMetrics) observe(side string, info worker.CallInfo, d time.Duration, err error) {
	kind := info.Kind.String()
	m.calls.WithLabelValues(info.Worker, side, kind, info.Function).Inc()
	m.duration.WithLabelValues(info.Worker, side, kind, info.Function).Observe(d.Seconds())
	if err != nil {
		m.errors.WithLabelValues(info.Worker, side, kind, info.Function, worker.ErrorKindOf(err).String()).Inc()
	}
}
