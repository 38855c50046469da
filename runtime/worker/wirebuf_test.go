package worker_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/rrefkit/rref/runtime/worker"
)

// TestReusedWireBuffersNeverShowThrough attacks the reuse of argument and
// result buffers (wirebuf.go): callers on many goroutines call a peer and
// themselves with distinct arguments of several encodings (a plain array,
// a string, a []byte that is sent as the caller's own slice), while
// Remotes leave values built in such buffers with their owners. Every
// result must match its own argument, and every value read back at the
// end must be the one made: a buffer given back while its bytes were still
// read would show another call's bytes.
func TestReusedWireBuffersNeverShowThrough(t *testing.T) {
	ws, err := worker.NewGroup([]string{"a", "b"}, worker.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer worker.ShutdownGroup(context.Background(), ws)
	for _, w := range ws {
		worker.Register(w, "twice", func(_ context.Context, v [4]int64) ([4]int64, error) {
			return [4]int64{2 * v[0], 2 * v[1], 2 * v[2], 2 * v[3]}, nil
		})
		worker.Register(w, "shout", func(_ context.Context, s string) (string, error) { return s + "!", nil })
		worker.Register(w, "bytes", func(_ context.Context, b []byte) ([]byte, error) { return append(b, '.'), nil })
	}
	ctx := context.Background()
	type kept struct {
		r    *worker.RRef[string]
		want string
	}
	var (
		mu      sync.Mutex
		remotes []kept
		wg      sync.WaitGroup
	)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := ws[g%2]
			for i := range 300 {
				to := []string{"a", "b"}[(g+i)%2] // the peer, and itself
				n := int64(g*1_000_000 + i)
				got, err := worker.Call[[4]int64](ctx, w, to, "twice", [4]int64{n, n + 1, n + 2, n + 3})
				if err != nil || got != [4]int64{2 * n, 2*n + 2, 2*n + 4, 2*n + 6} {
					t.Errorf("twice(%d) on %s = %v, %v", n, to, got, err)
					return
				}
				s := fmt.Sprintf("g%d-i%d", g, i)
				if got, err := worker.Call[string](ctx, w, to, "shout", s); err != nil || got != s+"!" {
					t.Errorf("shout(%q) on %s = %q, %v", s, to, got, err)
					return
				}
				if got, err := worker.Call[[]byte](ctx, w, to, "bytes", []byte(s)); err != nil || string(got) != s+"." {
					t.Errorf("bytes(%q) on %s = %q, %v", s, to, got, err)
					return
				}
				if i%20 == 0 {
					r, err := worker.Remote[string](ctx, w, to, "shout", s)
					if err != nil {
						t.Errorf("remote shout(%q): %v", s, err)
						return
					}
					mu.Lock()
					remotes = append(remotes, kept{r, s + "!"})
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	// All values are read before any is checked: a fetched value's frame
	// goes back to the pool once decoded, and the fetches after it reuse
	// it, so a value that still lay in its frame would change under them.
	got := make([]string, len(remotes))
	for i, k := range remotes {
		var err error
		if got[i], err = k.r.ToHere(ctx); err != nil {
			t.Errorf("reading a Remote's value back: %v", err)
		}
		k.r.Release()
	}
	for i, k := range remotes {
		if got[i] != k.want {
			t.Errorf("a Remote's value read back as %q; made as %q", got[i], k.want)
		}
	}
}

// TestRemoteValueOutlivesLaterCalls: a Remote's value, encoded in a reused
// buffer, stays with its owner; the calls the owner serves afterwards, in
// buffers from the same pool, must not overwrite it.
func TestRemoteValueOutlivesLaterCalls(t *testing.T) {
	ws, err := worker.NewGroup([]string{"a", "b"}, worker.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer worker.ShutdownGroup(context.Background(), ws)
	for _, w := range ws {
		worker.Register(w, "shout", func(_ context.Context, s string) (string, error) { return s + "!", nil })
	}
	ctx := context.Background()
	r, err := worker.Remote[string](ctx, ws[0], "b", "shout", "hello")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Release()
	for range 100 {
		if _, err := worker.Call[string](ctx, ws[0], "b", "shout", "zzzzzzzzzzzzzzzz"); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := r.ToHere(ctx); err != nil || got != "hello!" {
		t.Fatalf("the Remote's value reads %q, %v after later calls; made as %q", got, err, "hello!")
	}
}
