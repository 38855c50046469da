package worker

import (
	"context"
	"testing"
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

// benchCall measures Call round trips between two workers of this process.
func benchCall(b *testing.B, transport string) {
	peers := peersFor(transport)
	peers[0].Name, peers[1].Name = "server", "client"
	ctx := context.Background()
	var server *Worker
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
	defer server.Close()
	defer client.Close()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := Call[int64](ctx, client, "server", "add", [2]int64{1, 2}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRemoteToHereMem measures Remote, ToHere and Release of the RRef,
// the round trips of a remote value's whole life, between two workers.
func BenchmarkRemoteToHereMem(b *testing.B) {
	_, client := memServerClient(b)
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
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
