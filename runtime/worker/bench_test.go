package worker

import (
	"context"
	"reflect"
	"runtime"
	"testing"
	"time"

	"github.com/rrefkit/rref/runtime/core"
)

// memServerClient is an in-process server with an "add" function and its client.
func memServerClient(b *testing.B) (server, client *Worker) {
	ws, err := NewGroup([]string{"server", "client"}, Config{Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ws[1].Close(); ws[0].Close() })
	Register(ws[0], "add", func(ctx context.Context, x [2]int64) (int64, error) { return x[0] + x[1], nil })
	return ws[0], ws[1]
}

func BenchmarkCallMem(b *testing.B) {
	_, client := memServerClient(b)
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := Call[int64](ctx, client, "server", "add", [2]int64{1, 2}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCallSHM(b *testing.B) { benchCall(b, "shm") }
func BenchmarkCallTCP(b *testing.B) { benchCall(b, "tcp") }

// BenchmarkCallTCPParallel and BenchmarkCallSHMParallel are calls from 16
// goroutines at once, as bench rpc's 16-caller column: what batching
// several callers' frames into one write and one wake-up buys.
func BenchmarkCallTCPParallel(b *testing.B) { benchCallParallel(b, "tcp") }
func BenchmarkCallSHMParallel(b *testing.B) { benchCallParallel(b, "shm") }

// BenchmarkRemoteToHereTCP is BenchmarkRemoteToHereMem over tcp, the
// transport where a round trip costs most.
func BenchmarkRemoteToHereTCP(b *testing.B) {
	_, client := startBenchPair(b, "tcp")
	benchRemoteToHere(b, client)
}

// benchCallers is how many goroutines call at once in the parallel
// benchmarks, as in bench rpc.
const benchCallers = 16

func benchCallParallel(b *testing.B, transport string) {
	_, client := startBenchPair(b, transport)
	ctx := context.Background()
	b.ReportAllocs()
	b.SetParallelism((benchCallers + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := Call[int64](ctx, client, "server", "add", [2]int64{1, 2}); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// startBenchPair starts a server with an "add" function and a client,
// two workers of this process over transport, closed when b ends.
func startBenchPair(b *testing.B, transport string) (server, client *Worker) {
	peers := peersFor(transport)
	peers[0].Name, peers[1].Name = "server", "client"
	ctx := context.Background()
	done := make(chan error, 1)
	go func() {
		var err error
		server, err = Start(ctx, "server", peers, []byte("b"), Config{Logger: quiet,
			Setup: func(w *Worker) {
				Register(w, "add", func(ctx context.Context, x [2]int64) (int64, error) { return x[0] + x[1], nil })
			}})
		done <- err
	}()
	client, err := Start(ctx, "client", peers, []byte("b"), Config{Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { client.Close(); server.Close() })
	return server, client
}

// benchCall measures Call round trips between two workers of this process.
func benchCall(b *testing.B, transport string) {
	_, client := startBenchPair(b, transport)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Call[int64](ctx, client, "server", "add", [2]int64{1, 2}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRemoteToHereMem measures Remote, ToHere and Release of the RRef,
// the round trips of a remote value's whole life, between two workers.
func BenchmarkRemoteToHereMem(b *testing.B) {
	_, client := memServerClient(b)
	benchRemoteToHere(b, client)
}

// benchRemoteToHere measures Remote, ToHere and Release of "add" on the
// worker named server, from client.
func benchRemoteToHere(b *testing.B, client *Worker) {
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		r, err := Remote[int64](ctx, client, "server", "add", [2]int64{1, 2})
		if err != nil {
			b.Fatal(err)
		}
		if v, err := r.ToHere(ctx); err != nil || v != 3 {
			b.Fatal(v, err)
		}
		r.Release()
	}
}

// BenchmarkRemoteToHereSites is BenchmarkRemoteToHereMem with the client
// recording reference sites (Config.RecordRefSites) off and on, over one
// pair of workers, for the ratio of the two: its cost is a stack lookup
// and a map entry per reference, beside two messages and a fetch.
func BenchmarkRemoteToHereSites(b *testing.B) {
	_, client := memServerClient(b)
	for _, on := range []bool{false, true} {
		b.Run(map[bool]string{false: "off", true: "on"}[on], func(b *testing.B) {
			client.recordSites.Store(on)
			benchRemoteToHere(b, client)
		})
	}
}

// BenchmarkNewRRefSites is NewRRef and Release, which send nothing, with
// reference sites off and on: the difference is what recording costs per
// reference, unhidden by a round trip's swings.
func BenchmarkNewRRefSites(b *testing.B) {
	ws, err := NewGroup([]string{"A"}, Config{Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ws[0].Close() })
	for _, on := range []bool{false, true} {
		b.Run(map[bool]string{false: "off", true: "on"}[on], func(b *testing.B) {
			ws[0].recordSites.Store(on)
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				r, err := NewRRef(ws[0], i)
				if err != nil {
					b.Fatal(err)
				}
				r.Release()
			}
		})
	}
}

// BenchmarkRecordSite is what recording a reference's site costs alone: the
// caller's return address, and a note under the lock, amortizing the sweeps
// that drop released handles' notes (here every note is of a released
// handle, so each sweep empties the table: the most a sweep costs a note).
func BenchmarkRecordSite(b *testing.B) {
	ws, err := NewGroup([]string{"A"}, Config{Logger: quiet, RecordRefSites: true})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ws[0].Close() })
	w := ws[0]
	b.ReportAllocs()
	for h := core.HandleID(1); b.Loop(); h++ {
		site := w.callerSite()
		w.mu.Lock()
		w.noteRef(h, refNote{site: site, born: time.Since(monoEpoch), typ: reflect.TypeFor[int]()})
		w.mu.Unlock()
	}
}
