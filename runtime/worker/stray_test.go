package worker

import (
	"context"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// countRefusals is a slog handler counting the worker's refusal warnings.
type countRefusals struct{ n *atomic.Int64 }

func (h countRefusals) Enabled(context.Context, slog.Level) bool { return true }
func (h countRefusals) Handle(_ context.Context, r slog.Record) error {
	if strings.Contains(r.Message, "connection refused") {
		h.n.Add(1)
	}
	return nil
}
func (h countRefusals) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h countRefusals) WithGroup(string) slog.Handler      { return h }

// A stray connection used to abort Start (garbage: at once; a silent one:
// after 10 s), and the other member's Start failed with it. Now strays,
// garbage and a flood of connections are refused while the members connect.
func TestStraysDoNotStopStart(t *testing.T) {
	peers := peersFor("tcp")
	var refused atomic.Int64
	cfg := Config{Logger: slog.New(countRefusals{&refused}), Setup: groupSetup}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var a *Worker
	var aErr error
	started := make(chan struct{})
	go func() {
		defer close(started)
		a, aErr = Start(ctx, "A", peers, secret, cfg)
	}()
	// Strays at A's address before B dials: garbage, silent ones, a wrong
	// secret's hello-sized junk, and a flood.
	var strays []net.Conn
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := 0; i < 200; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for try := 0; try < 200; try++ {
				nc, err := net.Dial("tcp", peers[0].Addr)
				if err != nil {
					time.Sleep(5 * time.Millisecond) // A not listening yet
					continue
				}
				if i%2 == 0 {
					nc.Write([]byte(strings.Repeat("GET / HTTP/1.0\r\n", 8)))
				}
				mu.Lock()
				strays = append(strays, nc)
				mu.Unlock()
				return
			}
		}()
	}
	wg.Wait()
	defer func() {
		for _, nc := range strays {
			nc.Close()
		}
	}()
	begin := time.Now()
	b, err := Start(ctx, "B", peers, secret, cfg)
	if err != nil {
		t.Fatalf("B's Start beside %d strays: %v", len(strays), err)
	}
	<-started
	if aErr != nil {
		t.Fatalf("A's Start beside strays: %v", aErr)
	}
	t.Logf("group up %v after B began, beside %d strays; %d refused so far", time.Since(begin), len(strays), refused.Load())
	if v, err := Call[int](ctx, b, "A", "add", [2]int{2, 3}); err != nil || v != 5 {
		t.Fatalf("a call after the strays: %d, %v", v, err)
	}
	if refused.Load() == 0 {
		t.Error("no refusal was logged for 100 garbage connections")
	}
	if err := ShutdownGroup(ctx, []*Worker{a, b}); err != nil {
		t.Error(err)
	}
}
