package worker

import (
	"context"
	"runtime"
	"testing"
	"time"
)

// callAllocBound is the allocations a plain Call may average in steady
// state, on both sides together: call contexts come 32 to an allocation
// (ctxSlab), and the rest must be nothing, with room for the odd
// allocation of the test's own goroutines and the runtime.
const callAllocBound = 0.1

// TestPlainCallAllocatesNothingOnEveryTransport: a Call with no RRef
// argument allocates nothing on either side in steady state, over every
// transport: the caller's buffers and the frames the receiving goroutines
// read are pooled, a reply's frame goes to its caller and back, and a tcp
// reader's context is watched by one registration, not one per read.
func TestPlainCallAllocatesNothingOnEveryTransport(t *testing.T) {
	if testing.Short() || raceDetector {
		t.Skip("counts allocations")
	}
	for _, transport := range []string{"mem", "shm", "tcp"} {
		t.Run(transport, func(t *testing.T) {
			_, client := addPair(t, transport)
			ctx := context.Background()
			call := func() {
				if v, err := Call[int64](ctx, client, "server", "add", [2]int64{40, 2}); err != nil || v != 42 {
					t.Fatal(v, err)
				}
			}
			checkSteadyAllocs(t, "a call over "+transport, call)
		})
	}
}

// TestFetchAllocatesNothingOnEveryTransport: ToHere of a value that exists,
// as a program reads a parameter again and again, allocates nothing in
// steady state on either side: the owner's answer is read into a pooled
// buffer that goes to the fetcher with the value and comes back once the
// value is decoded.
func TestFetchAllocatesNothingOnEveryTransport(t *testing.T) {
	if testing.Short() || raceDetector {
		t.Skip("counts allocations")
	}
	for _, transport := range []string{"mem", "shm", "tcp"} {
		t.Run(transport, func(t *testing.T) {
			_, client := addPair(t, transport)
			ctx := context.Background()
			r, err := Remote[int64](ctx, client, "server", "add", [2]int64{40, 2})
			if err != nil {
				t.Fatal(err)
			}
			defer r.Release()
			fetch := func() {
				if v, err := r.ToHere(ctx); err != nil || v != 42 {
					t.Fatal(v, err)
				}
			}
			checkSteadyAllocs(t, "a fetch over "+transport, fetch)
		})
	}
}

// checkSteadyAllocs fails the test when op, named what, averages more
// than callAllocBound allocations in steady state (steadyAllocs).
func checkSteadyAllocs(t *testing.T, what string, op func()) {
	t.Helper()
	least := steadyAllocs(op)
	t.Logf("%s: %.3f allocations each", what, least)
	if least > callAllocBound {
		t.Errorf("%s allocates %.3f times on average in steady state (bound %v)", what, least, callAllocBound)
	}
}

// steadyAllocs warms op up, then returns the allocations it averages in
// the least of a few runs: a loaded host adds allocations of its own (a
// function held past inlineLimit hands its connection to a new
// goroutine), never takes op's away.
func steadyAllocs(op func()) float64 {
	const warm, ops, runs = 1000, 2000, 3
	for range warm {
		op()
	}
	least := -1.0
	for range runs {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for range ops {
			op()
		}
		runtime.ReadMemStats(&after)
		if per := float64(after.Mallocs-before.Mallocs) / ops; least < 0 || per < least {
			least = per
		}
	}
	return least
}

// addPair starts a server serving "add" (two int64s) and its client
// over transport.
func addPair(t *testing.T, transport string) (server, client *Worker) {
	return startPair(t, transport, func(w *Worker) {
		Register(w, "add", func(ctx context.Context, x [2]int64) (int64, error) { return x[0] + x[1], nil })
	})
}

// startPair starts a server set up by setup and its client over
// transport; both close with the test.
func startPair(t *testing.T, transport string, setup func(w *Worker)) (server, client *Worker) {
	if transport == "mem" {
		ws, err := NewGroup([]string{"server", "client"}, Config{Logger: quiet, Setup: setup})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ws[1].Close(); ws[0].Close() })
		return ws[0], ws[1]
	}
	peers := peersFor(transport)
	peers[0].Name, peers[1].Name = "server", "client"
	ctx := context.Background()
	done := make(chan error, 1)
	go func() {
		var err error
		server, err = Start(ctx, "server", peers, []byte("b"), Config{Logger: quiet, Setup: setup})
		done <- err
	}()
	client, err := Start(ctx, "client", peers, []byte("b"), Config{Logger: quiet})
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err != nil {
		server.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close(); server.Close() })
	return server, client
}

// TestAbandonedFetchesGiveTheirFramesBack attacks the fetch frame's trip to
// its fetcher and back: fetches abandoned at random moments (their answer
// arriving before, during or after the give-up) must give each frame back
// exactly once, or a later value would read another's bytes. Every
// completed fetch must return its own RRef's value.
func TestAbandonedFetchesGiveTheirFramesBack(t *testing.T) {
	for _, transport := range []string{"mem", "tcp"} {
		t.Run(transport, func(t *testing.T) {
			_, client := addPair(t, transport)
			ctx := context.Background()
			refs := make([]*RRef[int64], 8)
			for i := range refs {
				r, err := Remote[int64](ctx, client, "server", "add", [2]int64{int64(i) << 40, int64(i)})
				if err != nil {
					t.Fatal(err)
				}
				defer r.Release()
				refs[i] = r
			}
			abandoned := 0
			for n := range 2000 {
				i := n % len(refs)
				want := int64(i)<<40 + int64(i)
				fctx, cancel := context.WithTimeout(ctx, time.Duration(n%7)*10*time.Microsecond)
				v, err := refs[i].ToHere(fctx)
				cancel()
				if err == nil && v != want {
					t.Fatalf("fetch %d of RRef %d read %#x, want %#x", n, i, v, want)
				}
				if err != nil {
					abandoned++
				}
				if v, err := refs[(i+3)%len(refs)].ToHere(ctx); err != nil || v != int64((i+3)%len(refs))<<40+int64((i+3)%len(refs)) {
					t.Fatalf("fetch after an abandoned one: %#x, %v", v, err)
				}
			}
			t.Logf("%d of 2000 fetches abandoned", abandoned)
			if abandoned == 0 {
				t.Error("no fetch was abandoned: the test attacked nothing")
			}
		})
	}
}
