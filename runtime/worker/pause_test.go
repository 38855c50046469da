package worker

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// pauseFor is longer than the old default DeadAfter (1 s), after which a
// paused user's owner freed every value the user still held.
const pauseFor = 2500 * time.Millisecond

// runHolder is worker B of TestPauseKeepsReferences: it keeps the RRefs it
// is given, fetches them all when asked, and drops them.
func runHolder(spec string) int {
	var mu sync.Mutex
	var held []*RRef[int]
	return serveAsB("holder", spec, func(w *Worker) {
		Register(w, "hold", func(ctx context.Context, r *RRef[int]) (int, error) {
			mu.Lock()
			held = append(held, r.Keep())
			mu.Unlock()
			return 0, nil
		})
		Register(w, "sum", func(ctx context.Context, _ int) (int, error) {
			mu.Lock()
			defer mu.Unlock()
			total := 0
			for _, r := range held {
				v, err := r.ToHere(ctx)
				if err != nil {
					return 0, err
				}
				total += v
			}
			return total, nil
		})
		Register(w, "drop", func(ctx context.Context, _ int) (int, error) {
			mu.Lock()
			defer mu.Unlock()
			for _, r := range held {
				r.Release()
			}
			held = nil
			return 0, nil
		})
	})
}

// TestPauseKeepsReferences stops a user process (SIGSTOP) for longer than
// the old liveness bound while it holds 100 references, then resumes it:
// its owner must still hold every value, and the pair must go on.
func TestPauseKeepsReferences(t *testing.T) {
	if testing.Short() {
		t.Skip("pauses a process for seconds")
	}
	for _, transport := range []string{"tcp", "shm"} {
		t.Run(transport, func(t *testing.T) {
			peers := peersFor(transport)
			var spec []string
			for _, p := range peers {
				spec = append(spec, p.Name+"="+p.Addr)
			}
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), "RREF_WORKER_PEER="+strings.Join(spec, ";"), "RREF_WORKER_ROLE=holder")
			var stderr strings.Builder
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() {
				if t.Failed() {
					cmd.Process.Kill()
				}
				if err := cmd.Wait(); err != nil {
					t.Errorf("holder: %v: %s", err, stderr.String())
				}
			}()
			ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
			defer cancel()
			a, err := Start(ctx, "A", peers, secret, Config{Logger: quiet})
			if err != nil {
				cmd.Process.Kill()
				t.Fatal(err)
			}
			const n = 100
			want := 0
			for i := 0; i < n; i++ {
				r, err := NewRRef(a, i)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := Call[int](ctx, a, "B", "hold", r); err != nil {
					t.Fatal(err)
				}
				r.Release()
				want += i
			}
			owners := a.DebugInfo().Owners
			cmd.Process.Signal(syscall.SIGSTOP)
			time.Sleep(pauseFor)
			cmd.Process.Signal(syscall.SIGCONT)
			if got := a.DebugInfo().Owners; got != owners {
				t.Errorf("the owner went from %d values to %d while their user was paused", owners, got)
			}
			if got, err := Call[int](ctx, a, "B", "sum", 0); err != nil || got != want {
				t.Fatalf("values fetched after the pause: %d, %v; want %d", got, err, want)
			}
			for _, fn := range []string{"drop", "bye"} {
				if _, err := Call[int](ctx, a, "B", fn, 0); err != nil {
					t.Fatal(err)
				}
			}
			sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer scancel()
			if err := a.Shutdown(sctx); err != nil {
				t.Error(err)
			}
		})
	}
}
