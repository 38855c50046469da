package worker

import (
	"sync/atomic"
	"time"

	"github.com/rrefkit/rref/generated/rref"
)

// A worker counts what an operator watches with plain atomics, and exports
// nothing by itself: importing the runtime pulls in no metrics library and
// registers no HTTP handler. Package runtime/observe serves these counters
// to Prometheus, with pprof and the debug counters, for a worker it is
// given.

// FetchBuckets are the upper bounds, in seconds, of the ToHere latency
// histogram: 1 us to about 4 s, a factor of 4 apart, as the latencies span
// shared memory to a slow network.
var FetchBuckets = func() []float64 {
	b := make([]float64, fetchBuckets)
	for i := range b {
		b[i] = 1e-6 * float64(uint64(1)<<(2*i))
	}
	return b
}()

const fetchBuckets = 12

// counters are a worker's hot-path counts: [0] in, [1] out. A message's
// code is its frame's second byte (codes are below 128).
type counters struct {
	byCode  [2][128]atomic.Uint64
	invalid [2]atomic.Uint64
	bytes   [2]atomic.Uint64
	// The fetch histogram: counts per bucket (the last for slower ones),
	// and their sum in nanoseconds.
	fetch    [fetchBuckets + 1]atomic.Uint64
	fetchSum atomic.Uint64
}

func (m *counters) count(out bool, frame []byte) {
	d := 0
	if out {
		d = 1
	}
	if len(frame) >= 2 && frame[0] == rref.FrameVersion && frame[1] < 128 {
		m.byCode[d][frame[1]].Add(1)
	} else {
		m.invalid[d].Add(1)
	}
	m.bytes[d].Add(uint64(len(frame)))
}

func (m *counters) observeFetch(d time.Duration) {
	i := 0
	for i < fetchBuckets && d.Seconds() > FetchBuckets[i] {
		i++
	}
	m.fetch[i].Add(1)
	m.fetchSum.Add(uint64(d.Nanoseconds()))
}

// Metrics is a snapshot of a worker's counters since it started.
type Metrics struct {
	// Messages counts protocol messages by direction ("in", "out") and
	// type (the message's name, or "invalid" for a frame that is none).
	Messages map[string]map[string]uint64
	Bytes    map[string]uint64 // frame bytes by direction
	// FetchCounts are ToHere calls by latency: FetchCounts[i] took at most
	// FetchBuckets[i] (and more than the bucket before), the last entry
	// longer than every bucket. FetchSeconds is their total.
	FetchCounts  []uint64
	FetchSeconds float64
	// The transport and the scheduler of inline functions.
	CreditStalls, Parks, WakeUps uint64 // sends that waited for credits, receivers that parked, wake-ups of parked peers
	Handoffs, Overruns           uint64 // functions that gave their connection away to wait; moved off it by the watchdog
}

// Metrics returns the worker's counters.
func (w *Worker) Metrics() Metrics {
	m := Metrics{Messages: map[string]map[string]uint64{}, Bytes: map[string]uint64{}}
	for d, dir := range []string{"in", "out"} {
		byType := map[string]uint64{"invalid": w.counts.invalid[d].Load()}
		for _, c := range rref.Codes {
			byType[c.String()] = w.counts.byCode[d][c].Load()
		}
		m.Messages[dir] = byType
		m.Bytes[dir] = w.counts.bytes[d].Load()
	}
	for i := range w.counts.fetch {
		m.FetchCounts = append(m.FetchCounts, w.counts.fetch[i].Load())
	}
	m.FetchSeconds = float64(w.counts.fetchSum.Load()) / 1e9
	ts := w.transportStats()
	m.CreditStalls, m.Parks, m.WakeUps = ts.CreditStalls, ts.Parks, ts.WakeUps
	m.Handoffs, m.Overruns = w.stats.handoffs.Load(), w.stats.overruns.Load()
	return m
}

// Done is closed when the worker closes (Close, Shutdown, a failed Start):
// observers stop with it.
func (w *Worker) Done() <-chan struct{} { return w.ctx.Done() }
