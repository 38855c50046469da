package worker

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/rrefkit/rref/generated/rref"
)

// metrics are a worker's Prometheus collectors, in a registry of its own.
type metrics struct {
	reg      *prometheus.Registry
	messages *prometheus.CounterVec // by direction and message type
	bytes    *prometheus.CounterVec // by direction
	fetch    prometheus.Histogram   // ToHere latency
	// The counters of the hot path, resolved once: [0] in, [1] out. A
	// message's code is its frame's second byte (codes are below 128).
	byCode     [2][128]prometheus.Counter
	invalid    [2]prometheus.Counter
	bytesByDir [2]prometheus.Counter
}

func newMetrics(w *Worker) *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		messages: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "rref_messages_total",
			Help: "Protocol messages sent and received, by type."}, []string{"direction", "type"}),
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "rref_bytes_total",
			Help: "Frame bytes sent and received."}, []string{"direction"}),
		fetch: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "rref_fetch_seconds",
			Help: "ToHere latency.", Buckets: prometheus.ExponentialBuckets(1e-6, 4, 12)}),
	}
	gauge := func(name, help string, f func(DebugInfo) float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, func() float64 { return f(w.DebugInfo()) })
	}
	for d, dir := range []string{"in", "out"} {
		for _, c := range rref.Codes {
			m.byCode[d][c] = m.messages.WithLabelValues(dir, c.String())
		}
		m.invalid[d] = m.messages.WithLabelValues(dir, "invalid")
		m.bytesByDir[d] = m.bytes.WithLabelValues(dir)
	}
	m.reg.MustRegister(m.messages, m.bytes, m.fetch,
		gauge("rref_owners", "OwnerRRefs on this worker.", func(d DebugInfo) float64 { return float64(d.Owners) }),
		gauge("rref_forks", "Known forks of this worker's values.", func(d DebugInfo) float64 { return float64(d.Forks) }),
		gauge("rref_pending_users", "UserRRefs not yet confirmed.", func(d DebugInfo) float64 { return float64(d.PendingUsers) }),
		gauge("rref_pending_children", "Forked children not yet answered.", func(d DebugInfo) float64 { return float64(d.PendingChildren) }),
		gauge("rref_pending_calls", "Calls waiting for their reply.", func(d DebugInfo) float64 { return float64(d.PendingCalls) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "rref_credit_stalls_total",
			Help: "Sends that waited for transport credits."},
			func() float64 { return float64(w.transportStats().CreditStalls) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "rref_transport_parks_total",
			Help: "Receivers that stopped spinning and parked."},
			func() float64 { return float64(w.transportStats().Parks) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "rref_transport_wakeups_total",
			Help: "Wake-up calls made for parked peers (shared memory)."},
			func() float64 { return float64(w.transportStats().WakeUps) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "rref_inline_handoffs_total",
			Help: "Functions run on their receiving goroutine that gave their connection away to wait."},
			func() float64 { return float64(w.stats.handoffs.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "rref_inline_overruns_total",
			Help: "Functions moved off their connection by the watchdog (blocked or ran past the inline limit)."},
			func() float64 { return float64(w.stats.overruns.Load()) }),
	)
	return m
}

func (m *metrics) count(out bool, frame []byte) {
	d := 0
	if out {
		d = 1
	}
	c := m.invalid[d]
	if len(frame) >= 2 && frame[0] == rref.FrameVersion && frame[1] < 128 && m.byCode[d][frame[1]] != nil {
		c = m.byCode[d][frame[1]]
	}
	c.Inc()
	m.bytesByDir[d].Add(float64(len(frame)))
}

func (m *metrics) observeFetch(d time.Duration) { m.fetch.Observe(d.Seconds()) }

// ServeDebug serves, on an HTTP listener at addr, /metrics (Prometheus),
// /debug/rref (the debug counters as JSON) and /debug/pprof/. It is opt-in:
// nothing listens unless it is called. It stops when ctx ends or the worker
// closes, and returns the address it listens on.
func (w *Worker) ServeDebug(ctx context.Context, addr string) (net.Addr, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(w.metrics.reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("/debug/rref", func(rw http.ResponseWriter, _ *http.Request) {
		rw.Header().Set("Content-Type", "application/json")
		json.NewEncoder(rw).Encode(w.DebugInfo())
	})
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	if !w.gs.start(func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			w.cfg.Logger.Warn("debug listener stopped", "worker", w.name, "err", err)
		}
	}) {
		ln.Close()
		return nil, ErrClosed
	}
	w.gs.start(func() {
		select {
		case <-ctx.Done():
		case <-w.ctx.Done():
		}
		srv.Close()
	})
	return ln.Addr(), nil
}
