package worker_test

import (
	"context"
	"errors"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rrefkit/rref/runtime/worker"
)

// TestLeakErrorIsReadable: a shutdown that gives up names what each worker
// still holds by worker name and short id, with values decoded; it lists
// no freed value, no reference of a dead worker, and no raw number.
func TestLeakErrorIsReadable(t *testing.T) {
	ctx := context.Background()
	setup := func(w *worker.Worker) {
		worker.Register(w, "greet", func(ctx context.Context, name string) (string, error) { return "hello " + name, nil })
		worker.Register(w, "hold", func(ctx context.Context, r *worker.RRef[string]) (int, error) { r.Keep(); return 0, nil })
	}
	ws, err := worker.NewGroup([]string{"A", "B", "C", "D"}, worker.Config{Setup: setup})
	if err != nil {
		t.Fatal(err)
	}
	a, d := ws[0], ws[3]
	mine, _ := worker.NewRRef(a, 42)
	freed, _ := worker.NewRRef(a, 7)
	freed.Release()
	greeting, err := worker.Remote[string](ctx, a, "B", "greet", "you")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := greeting.ToHere(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := worker.Call[int](ctx, a, "D", "hold", greeting); err != nil {
		t.Fatal(err)
	}
	// D dies holding a reference: B reclaims it, and does not report it.
	d.Close()
	waitUntil(t, func() bool { return ws[1].DebugInfo().Forks == 1 }) // A's alone

	sctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	err = worker.ShutdownGroup(sctx, ws[:3])
	runtime.KeepAlive(mine)
	runtime.KeepAlive(greeting)
	if !errors.Is(err, worker.ErrLeak) {
		t.Fatalf("shutdown with references held: %v", err)
	}
	text := err.Error()
	for _, want := range []string{
		"worker A: references still held at shutdown:",
		"value A:", "= 42, kept alive by A's program",
		"reference to value A:",
		"worker B: references still held at shutdown:",
		`= "hello you", kept alive by A`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("no %q in:\n%s", want, text)
		}
	}
	if regexp.MustCompile(`\d{7,}`).MatchString(text) || strings.Contains(text, "tombstone") || strings.Contains(text, "= 7") {
		t.Errorf("raw ids, tombstones or a freed value in:\n%s", text)
	}
	var les []*worker.LeakError
	for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
		var le *worker.LeakError
		if errors.As(e, &le) {
			les = append(les, le)
		}
	}
	i := slices.IndexFunc(les, func(le *worker.LeakError) bool { return le.Worker == "B" })
	if i < 0 || len(les[i].Held) != 1 || les[i].Held[0].Kind != worker.HeldValue || !slices.Equal(les[i].Held[0].Holders, []string{"A"}) {
		t.Errorf("B's report: %+v", les)
	}
}

// waitUntil polls cond for up to 30 s.
func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatal("condition never held")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
