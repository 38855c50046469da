// Package observe serves a worker's counters to operators: Prometheus
// metrics, the debug counters as JSON, who holds which reference (as JSON,
// and as a page that joins the group's members), and pprof, on an HTTP
// listener that nothing opens unless Serve is called. It is a package of its own so that
// a program importing only runtime/worker links no metrics library and
// registers nothing on http.DefaultServeMux.
package observe

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/rrefkit/rref/internal/refview"
	"github.com/rrefkit/rref/runtime/worker"
)

// Serve serves, on an HTTP listener at addr, for worker w: /metrics
// (Prometheus), /debug/rref (the debug counters as JSON), /debug/rrefs
// (the snapshots of what w, and the workers of Members, own and hold, as
// JSON: a refview document), /debug/rrefs/view (a page of them, joined
// with those of Peers' listeners: grouped by member or by value, sorted
// and filtered by query parameters, with each value's fork tree) and
// /debug/pprof/. It stops when ctx ends or the worker closes, and returns
// the address it listens on. /metrics also serves the Collectors option's
// collectors, such as the CallMetrics installed in w's interceptors.
func Serve(ctx context.Context, w *worker.Worker, addr string, opts ...Option) (net.Addr, error) {
	if w == nil {
		return nil, errNoWorker
	}
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	refs := &refsServer{workers: append([]*worker.Worker{w}, o.members...), peers: o.peers, client: &http.Client{}}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	reg := prometheus.NewRegistry()
	for _, c := range append([]prometheus.Collector{NewCollector(w)}, o.collectors...) {
		if err := reg.Register(c); err != nil {
			ln.Close()
			return nil, err
		}
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("/debug/rref", func(rw http.ResponseWriter, _ *http.Request) {
		rw.Header().Set("Content-Type", "application/json")
		json.NewEncoder(rw).Encode(w.DebugInfo())
	})
	mux.HandleFunc(refview.Path, refs.serveJSON)
	mux.HandleFunc(RefsViewPath, refs.servePage)
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: readHeaderTimeout}
	served := make(chan struct{})
	go func() {
		defer close(served)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			slog.Warn("rref observe: listener stopped", "addr", ln.Addr().String(), "worker", w.Name(), "err", err)
		}
	}()
	go func() {
		select {
		case <-ctx.Done():
		case <-w.Done():
		}
		srv.Close()
		<-served
		refs.client.CloseIdleConnections()
	}()
	return ln.Addr(), nil
}

// readHeaderTimeout bounds a client that opens a connection and says
// nothing (Slowloris): debug scrapes send their headers at once.
const readHeaderTimeout = 5 * time.Second

// Collector exports a worker's counters; it reads them on every scrape.
type Collector struct {
	w                                       *worker.Worker
	messages, bytes, fetch                  *prometheus.Desc
	owners, forks, pendingUsers, pendingCh  *prometheus.Desc
	pendingCalls                            *prometheus.Desc
	stalls, parks, wakeUps, handoffs, overs *prometheus.Desc
}

// NewCollector is a Prometheus collector of w's counters, for a registry of
// the caller's (Serve makes its own).
func NewCollector(w *worker.Worker) *Collector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, labels, nil)
	}
	return &Collector{w: w,
		messages:     d("rref_messages_total", "Protocol messages sent and received, by type.", "direction", "type"),
		bytes:        d("rref_bytes_total", "Frame bytes sent and received.", "direction"),
		fetch:        d("rref_fetch_seconds", "ToHere latency."),
		owners:       d("rref_owners", "OwnerRRefs on this worker."),
		forks:        d("rref_forks", "Known forks of this worker's values."),
		pendingUsers: d("rref_pending_users", "UserRRefs not yet confirmed."),
		pendingCh:    d("rref_pending_children", "Forked children not yet answered."),
		pendingCalls: d("rref_pending_calls", "Calls waiting for their reply."),
		stalls:       d("rref_credit_stalls_total", "Sends that waited for transport credits."),
		parks:        d("rref_transport_parks_total", "Receivers that stopped spinning and parked."),
		wakeUps:      d("rref_transport_wakeups_total", "Wake-up calls made for parked peers (shared memory)."),
		handoffs:     d("rref_inline_handoffs_total", "Functions run on their receiving goroutine that gave their connection away to wait."),
		overs:        d("rref_inline_overruns_total", "Functions moved off their connection by the watchdog (blocked or ran past the inline limit)."),
	}
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.messages, c.bytes, c.fetch, c.owners, c.forks, c.pendingUsers,
		c.pendingCh, c.pendingCalls, c.stalls, c.parks, c.wakeUps, c.handoffs, c.overs} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	m := c.w.Metrics()
	for dir, byType := range m.Messages {
		for typ, n := range byType {
			ch <- prometheus.MustNewConstMetric(c.messages, prometheus.CounterValue, float64(n), dir, typ)
		}
	}
	for dir, n := range m.Bytes {
		ch <- prometheus.MustNewConstMetric(c.bytes, prometheus.CounterValue, float64(n), dir)
	}
	buckets := map[float64]uint64{}
	var total uint64
	for i, n := range m.FetchCounts {
		total += n
		if i < len(worker.FetchBuckets) {
			buckets[worker.FetchBuckets[i]] = total // Prometheus buckets are cumulative
		}
	}
	ch <- prometheus.MustNewConstHistogram(c.fetch, total, m.FetchSeconds, buckets)
	d := c.w.DebugInfo()
	gauge := func(desc *prometheus.Desc, v int) {
		ch <- prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, float64(v))
	}
	gauge(c.owners, d.Owners)
	gauge(c.forks, d.Forks)
	gauge(c.pendingUsers, d.PendingUsers)
	gauge(c.pendingCh, d.PendingChildren)
	gauge(c.pendingCalls, d.PendingCalls)
	counter := func(desc *prometheus.Desc, v uint64) {
		ch <- prometheus.MustNewConstMetric(desc, prometheus.CounterValue, float64(v))
	}
	counter(c.stalls, m.CreditStalls)
	counter(c.parks, m.Parks)
	counter(c.wakeUps, m.WakeUps)
	counter(c.handoffs, m.Handoffs)
	counter(c.overs, m.Overruns)
}
