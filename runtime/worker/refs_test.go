package worker

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rrefkit/rref/generated/rref"
	"github.com/rrefkit/rref/runtime/core"
)

// holdForever is how long a held member's messages are held back: past
// any test, which closes the member instead of waiting for them.
const holdForever = time.Hour

var refsGroups atomic.Int64

// refsGroup starts members A, B and C over transport (mem or shm) with
// "add", "slow" (which waits for gate) and "hold" (which keeps its RRef
// argument) on each. While holdB is set, every protocol message B sends is
// held back for good, so what waits for B's answer stays waiting. A
// records reference sites; B and C do not.
func refsGroup(t *testing.T, transport string, holdB *atomic.Bool, gate chan struct{}) (a, b, c *Worker) {
	t.Helper()
	setup := func(w *Worker) {
		Register(w, "add", func(ctx context.Context, x [2]int) (int, error) { return x[0] + x[1], nil })
		Register(w, "slow", func(ctx context.Context, x int) (int, error) {
			select {
			case <-gate:
				return x, nil
			case <-ctx.Done():
				return 0, ctx.Err()
			}
		})
		Register(w, "hold", func(ctx context.Context, r *RRef[int]) (int, error) { r.Keep(); return 0, nil })
	}
	jitterOf := func(name string) func() time.Duration {
		if name != "B" {
			return nil
		}
		return func() time.Duration {
			if holdB.Load() {
				return holdForever
			}
			return 0
		}
	}
	cfg := Config{Logger: quiet, Setup: setup, CallTimeout: time.Minute}
	var ws []*Worker
	switch transport {
	case "mem":
		var err error
		if ws, err = NewGroup([]string{"A", "B", "C"}, cfg); err != nil {
			t.Fatal(err)
		}
		// Before any traffic: only a worker's sends read its jitter.
		for _, w := range ws {
			w.cfg.jitter = jitterOf(w.name)
		}
	case "shm":
		g := fmt.Sprintf("shm:rf%d-%d", os.Getpid(), refsGroups.Add(1))
		peers := []Peer{{"A", g}, {"B", g}, {"C", g}}
		ws = make([]*Worker, len(peers))
		errs := make(chan error, len(peers))
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for i, p := range peers {
			go func() {
				c := cfg
				c.jitter = jitterOf(p.Name)
				var err error
				ws[i], err = Start(ctx, p.Name, peers, secret, c)
				errs <- err
			}()
		}
		for range peers {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Cleanup(func() {
		for _, w := range ws {
			if w != nil {
				w.Close()
			}
		}
	})
	ws[0].recordSites.Store(true)
	return ws[0], ws[1], ws[2]
}

// waitRefs waits until w's snapshot satisfies cond, and returns it.
func waitRefs(t *testing.T, ctx context.Context, w *Worker, what string, cond func(RefsSnapshot) bool) RefsSnapshot {
	t.Helper()
	for {
		s, err := w.Refs(ctx)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if cond(s) {
			return s
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s: never seen; last snapshot of %s: %+v", what, w.name, s)
		case <-time.After(time.Millisecond):
		}
	}
}

func findValue(s RefsSnapshot, id string) (OwnedValue, bool) {
	for _, v := range s.Values {
		if v.ID == id {
			return v, true
		}
	}
	return OwnedValue{}, false
}

func findRef(s RefsSnapshot, value string) (HeldRefInfo, bool) {
	for _, r := range s.References {
		if r.Value == value {
			return r, true
		}
	}
	return HeldRefInfo{}, false
}

// TestRefsStates: a member's snapshot says what each value and reference
// is in, through a reference's life: confirmed (with its owner's value
// and the fork it knows), a value still being created with a fetch
// waiting, a Remote awaiting its owner's confirmation, a reference pinned
// by a copy lent while the owner's answer is held back, the lent copy
// awaiting on its receiver, a released reference kept by its pin, and all
// orphaned once the owner dies; with sites recorded on A only.
func TestRefsStates(t *testing.T) {
	for _, transport := range []string{"mem", "shm"} {
		t.Run(transport, func(t *testing.T) { testRefsStates(t, transport) })
	}
}

func testRefsStates(t *testing.T, transport string) {
	var holdB atomic.Bool
	gate := make(chan struct{})
	a, b, c := refsGroup(t, transport, &holdB, gate)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	r1, err := Remote[int](ctx, a, "B", "add", [2]int{1, 2})
	if err != nil {
		t.Fatal(err)
	}
	if v, err := r1.ToHere(ctx); err != nil || v != 3 {
		t.Fatalf("ToHere: %d %v", v, err)
	}
	sa := waitRefs(t, ctx, a, "A's reference confirmed", func(s RefsSnapshot) bool {
		return len(s.References) == 1 && s.References[0].State == RefConfirmed
	})
	ref1 := sa.References[0]
	if !ref1.Held || ref1.Owner != "B" || ref1.Parent != "" || ref1.Type != "int" || !strings.Contains(ref1.Site, "refs_test.go:") ||
		ref1.Age <= 0 || !sa.Sites || len(sa.Values) != 0 || sa.Member != "A" {
		t.Fatalf("A's confirmed reference: %+v", sa)
	}
	sb, err := b.Refs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	v1, ok := findValue(sb, ref1.Value)
	if !ok || v1.State != ValueReady || v1.Type != "int" || v1.Size <= 0 || v1.Age <= 0 || v1.Program != 0 ||
		len(v1.Forks) != 1 || v1.Forks[0] != (KnownFork{ID: ref1.Fork, Holder: "A"}) || sb.Sites || v1.Site != "" {
		t.Fatalf("B's value %s: %+v", ref1.Value, sb)
	}

	// A value still being made, with a fetch waiting for it.
	r3, err := Remote[int](ctx, a, "B", "slow", 7)
	if err != nil {
		t.Fatal(err)
	}
	f3 := r3.Fetch(ctx)
	waitRefs(t, ctx, b, "B's value being made with a fetch waiting", func(s RefsSnapshot) bool {
		for _, v := range s.Values {
			if v.State == ValueCreating && v.Function == "slow" && v.WaitingFetches == 1 && v.Size == -1 {
				return true
			}
		}
		return false
	})
	close(gate)
	if v, err := f3.Wait(ctx); err != nil || v != 7 {
		t.Fatalf("slow: %d %v", v, err)
	}
	r3.Release()

	// B's answers are held from here on: a Remote stays awaiting.
	holdB.Store(true)
	r2, err := Remote[int](ctx, a, "B", "add", [2]int{2, 2})
	if err != nil {
		t.Fatal(err)
	}
	sa, _ = a.Refs(ctx)
	var ref2 HeldRefInfo
	for _, r := range sa.References {
		if r.Value != ref1.Value && r.State == RefAwaiting {
			ref2 = r
		}
	}
	if ref2.Value == "" || !ref2.Held {
		t.Fatalf("A's Remote whose confirmation B holds back: %+v", sa.References)
	}

	// A lends r1 to C: C asks B, whose answer is held, so C's copy awaits
	// and A's reference is pinned by it.
	fut := Go[int](ctx, a, "C", "hold", r1)
	sc := waitRefs(t, ctx, c, "C's copy awaiting", func(s RefsSnapshot) bool { return len(s.References) == 1 })
	got := sc.References[0]
	if got.State != RefAwaiting || got.Value != ref1.Value || got.Parent != ref1.Fork || got.From != "A" || got.Owner != "B" ||
		got.WaitingRuns != 1 || got.Type != "" || got.Site != "" || got.Age != 0 {
		t.Fatalf("C's lent copy: %+v", got)
	}
	sa = waitRefs(t, ctx, a, "A's reference pinned", func(s RefsSnapshot) bool {
		r, _ := findRef(s, ref1.Value)
		return r.State == RefPinned
	})
	if r, _ := findRef(sa, ref1.Value); len(r.Lent) != 1 || r.Lent[0] != (LentCopy{Fork: got.Fork, To: "C"}) {
		t.Fatalf("A's pinned reference: %+v", r)
	}
	waitRefs(t, ctx, b, "B knows C's fork", func(s RefsSnapshot) bool {
		v, _ := findValue(s, ref1.Value)
		return len(v.Forks) == 2
	})

	// Released, the reference stays while its copy is pinned.
	r1.Release()
	sa, _ = a.Refs(ctx)
	if r, ok := findRef(sa, ref1.Value); !ok || r.Held || r.State != RefPinned {
		t.Fatalf("A's released reference with a copy in flight: %+v", sa.References)
	}

	// B dies: everything that refers to its values is orphaned, and A's
	// released reference goes once its pin is resolved.
	b.Close()
	waitRefs(t, ctx, a, "A's references orphaned", func(s RefsSnapshot) bool {
		r, ok := findRef(s, ref2.Value)
		return len(s.References) == 1 && ok && r.State == RefOrphaned && r.Cut == "owner_failed" && r.Held
	})
	waitRefs(t, ctx, c, "C's copy orphaned", func(s RefsSnapshot) bool {
		return len(s.References) == 1 && s.References[0].State == RefOrphaned && s.References[0].Value == ref1.Value
	})
	if _, err := fut.Wait(ctx); err != nil {
		t.Logf("the lending call ended: %v", err) // its argument's owner died: either outcome is the protocol's
	}
	r2.Release()
}

// TestRefStateOf: each combination of a record's machine state, its cut
// and its pins shows as one state, a cut first.
func TestRefStateOf(t *testing.T) {
	for _, c := range []struct {
		in   core.ReferenceEntry
		want RefState
	}{
		{core.ReferenceEntry{State: rref.UserPending}, RefAwaiting},
		{core.ReferenceEntry{State: rref.UserPendingReleased, Pinned: 1}, RefAwaiting},
		{core.ReferenceEntry{State: rref.UserConfirmed}, RefConfirmed},
		{core.ReferenceEntry{State: rref.UserConfirmed, Pinned: 2}, RefPinned},
		{core.ReferenceEntry{State: rref.UserDraining, Pinned: 1}, RefPinned},
		{core.ReferenceEntry{State: rref.UserDraining, Fetching: 1}, RefReleasing},
		{core.ReferenceEntry{State: rref.UserOrphaned, Cut: rref.ErrorKindOwnerFailed, Pinned: 1}, RefOrphaned},
		{core.ReferenceEntry{State: rref.UserLost, Cut: rref.ErrorKindLost}, RefCut},
		{core.ReferenceEntry{State: rref.UserLost, Cut: rref.ErrorKindBadRequest}, RefCut},
	} {
		if got := refStateOf(c.in); got != c.want {
			t.Errorf("%+v: %s, want %s", c.in, got, c.want)
		}
	}
}

// TestRefNotesArePruned: with sites recorded, the notes of released
// references are dropped as the map grows, so a long run holding a few
// references keeps a few notes, never one per reference ever made.
func TestRefNotesArePruned(t *testing.T) {
	ws, err := NewGroup([]string{"A"}, Config{Logger: quiet, RecordRefSites: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ws[0].Close()
	a := ws[0]
	keep, _ := NewRRef(a, -1)
	for i := range 10 * refNotesPruneFloor {
		r, err := NewRRef(a, i)
		if err != nil {
			t.Fatal(err)
		}
		r.Release()
	}
	a.mu.Lock()
	n := len(a.refNotes)
	a.mu.Unlock()
	if n > refNotesPruneFloor {
		t.Fatalf("%d notes kept for 1 reference held of %d made", n, 10*refNotesPruneFloor+1)
	}
	s, err := a.Refs(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Values) != 1 || s.Values[0].Program != 1 || s.Values[0].Type != "int" || !strings.Contains(s.Values[0].Site, "refs_test.go:") {
		t.Fatalf("the value kept: %+v", s.Values)
	}
	keep.Release()
}

// TestRefSiteThroughInterceptors: with client interceptors around Remote,
// the site recorded is still the program's line, not one inside the
// interceptor chain (the chain adds frames between the two).
func TestRefSiteThroughInterceptors(t *testing.T) {
	pass := func(ctx context.Context, _ CallInfo, invoke Invoker) error { return invoke(ctx) }
	ws, err := NewGroup([]string{"A", "B"}, Config{Logger: quiet, RecordRefSites: true,
		ClientInterceptors: []ClientInterceptor{pass, pass},
		Setup: func(w *Worker) {
			Register(w, "add", func(ctx context.Context, x [2]int) (int, error) { return x[0] + x[1], nil })
		}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	defer ShutdownGroup(ctx, ws)
	r, err := Remote[int](ctx, ws[0], "B", "add", [2]int{1, 2})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Release()
	s := waitRefs(t, ctx, ws[0], "the Remote's reference", func(s RefsSnapshot) bool { return len(s.References) == 1 })
	if site := s.References[0].Site; !strings.Contains(site, "refs_test.go:") {
		t.Fatalf("site %q, want the test's own line", site)
	}
}
