package worker

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/rrefkit/rref/runtime/core"
)

// failures records the OnPeerFailed and OnFenced reports of one worker.
type failures struct {
	mu     sync.Mutex
	peers  []string
	fenced []error
}

func (f *failures) peerFailed(peer string, err error) {
	f.mu.Lock()
	f.peers = append(f.peers, peer)
	f.mu.Unlock()
}

func (f *failures) onFenced(err error) {
	f.mu.Lock()
	f.fenced = append(f.fenced, err)
	f.mu.Unlock()
}

func (f *failures) has(peer string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Contains(f.peers, peer)
}

func (f *failures) wasFenced() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.fenced) > 0
}

// TestOneVerdictOnDeath: one link takes a member for dead while the
// member's other links still see it alive, as when a member paused past
// DeadAfter was fenced by its shm peers' heartbeats and not by a tcp peer,
// whose kernel kept acknowledging. The tcp member used to keep the fenced
// member's references and values for good (918-2517 leaked references in
// the soak); now the whole group fences it, the fenced member hears of it
// and closes, and the others shut down with nothing held.
func TestOneVerdictOnDeath(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	shm := freeSHM()
	peers := []Peer{{"t", freeTCP(t)}, {"s1", shm}, {"s2", shm}}
	fs := map[string]*failures{}
	type result struct {
		name string
		w    *Worker
		err  error
	}
	res := make(chan result, len(peers))
	for _, p := range peers {
		f := &failures{}
		fs[p.Name] = f
		go func() {
			w, err := Start(ctx, p.Name, peers, secret, Config{Logger: quiet, Setup: groupSetup, OnPeerFailed: f.peerFailed, OnFenced: f.onFenced})
			res <- result{p.Name, w, err}
		}()
	}
	ws := map[string]*Worker{}
	for range peers {
		r := <-res
		if r.err != nil {
			t.Fatalf("%s: %v", r.name, r.err)
		}
		ws[r.name] = r.w
	}
	defer func() {
		for _, w := range ws {
			w.Close()
		}
	}()
	// References every way between the survivors and the member to be
	// fenced: values of each held by the others, confirmed.
	var held []*RRef[int]
	for _, owner := range []string{"t", "s1", "s2"} {
		for _, holder := range []string{"t", "s1", "s2"} {
			if owner == holder {
				continue
			}
			r, err := Remote[int](ctx, ws[holder], owner, "add", [2]int{1, 2})
			if err != nil {
				t.Fatal(err)
			}
			if v, err := r.ToHere(ctx); err != nil || v != 3 {
				t.Fatalf("%s's value on %s: %d, %v", owner, holder, v, err)
			}
			if holder != "s2" {
				held = append(held, r)
			}
		}
	}
	// s1's link alone takes s2 for dead.
	s2 := core.WorkerID(slices.IndexFunc(peers, func(p Peer) bool { return p.Name == "s2" }) + 1)
	ws["s1"].peerFailed(s2, errors.New("test: s2's heartbeat stopped for DeadAfter"))
	waitUntil(t, ctx, "t fencing s2", func() bool { return fs["t"].has("s2") })
	waitUntil(t, ctx, "s2 hearing it was fenced", fs["s2"].wasFenced)
	waitUntil(t, ctx, "s2 closing", ws["s2"].isClosed)
	fs["s2"].mu.Lock()
	if err := fs["s2"].fenced[0]; !errors.Is(err, ErrFenced) {
		t.Errorf("s2 was told %v; want ErrFenced", err)
	}
	fs["s2"].mu.Unlock()
	// A call on the fenced worker says why it is refused.
	if _, err := Call[int](ctx, ws["s2"], "t", "add", [2]int{1, 1}); !errors.Is(err, ErrClosed) || !errors.Is(err, ErrFenced) {
		t.Errorf("a call on the fenced s2: %v; want ErrClosed and ErrFenced", err)
	}
	if fs["t"].has("s1") || fs["s1"].has("t") {
		t.Error("the survivors fenced each other")
	}
	// s2's values are gone for everyone; the survivors' still work.
	for _, r := range held {
		v, err := r.ToHere(ctx)
		switch r.Owner() {
		case "s2":
			if !errors.Is(err, ErrOwnerFailed) {
				t.Errorf("a value of the fenced s2: %d, %v; want ErrOwnerFailed", v, err)
			}
		default:
			if err != nil || v != 3 {
				t.Errorf("a value of %s: %d, %v", r.Owner(), v, err)
			}
		}
		r.Release()
	}
	// Nothing held for s2 anywhere: the survivors shut down clean.
	if err := ShutdownGroup(ctx, []*Worker{ws["t"], ws["s1"]}); err != nil {
		t.Fatalf("the survivors' shutdown: %v", err)
	}
}

// waitUntil polls cond until it holds or ctx ends.
func waitUntil(t *testing.T, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("%s: %v", what, ctx.Err())
		case <-time.After(time.Millisecond):
		}
	}
}
