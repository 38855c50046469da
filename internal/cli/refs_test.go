package cli

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rrefkit/rref/runtime/observe"
	"github.com/rrefkit/rref/runtime/worker"
)

// TestRefs: rrefgen refs joins two members' listeners into one picture:
// by member, B's value and A's reference to it, with the site A made it
// at; by value, the value with A's reference; filtered by type; as JSON;
// a listener that does not answer is named, and fails the run, after the
// others are printed; and its usage errors are one line with a hint.
func TestRefs(t *testing.T) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	ws, err := worker.NewGroup([]string{"A", "B"}, worker.Config{Logger: quiet, RecordRefSites: true, Setup: func(w *worker.Worker) {
		worker.Register(w, "add", func(ctx context.Context, x [2]int) (int, error) { return x[0] + x[1], nil })
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, w := range ws {
			w.Close()
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	r, err := worker.Remote[int](ctx, ws[0], "B", "add", [2]int{20, 22})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Release()
	if err := worker.SettleGroup(ctx, ws); err != nil {
		t.Fatal(err)
	}
	var addrs []string
	for _, w := range ws {
		a, err := observe.Serve(ctx, w, "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addrs = append(addrs, a.String())
	}
	list := strings.Join(addrs, ",")

	code, out, errs := run(t, "", "refs", list)
	for _, want := range []string{"2 members (A, B), 1 values owned, 1 references, 1 held by programs, 1 confirmed; 0 copies in flight",
		"member A: 0 values owned, 1 references held", "member B: 1 values owned, 0 references held", "cli/refs_test.go:"} {
		if code != ExitOK || !strings.Contains(out, want) {
			t.Errorf("refs by member: exit %d, no %q in\n%s%s", code, want, out, errs)
		}
	}
	code, out, _ = run(t, "", "refs", "-by", "value", "-sort", "size", addrs[0], addrs[1])
	if code != ExitOK || !strings.Contains(out, "on B: ready, int, 1 B, age ") || !strings.Contains(out, "(its Remote)  confirmed") {
		t.Errorf("refs by value: exit %d\n%s", code, out)
	}
	if code, out, _ := run(t, "", "refs", "-by", "value", "-type", "string", list); code != ExitOK || strings.Contains(out, "value ") {
		t.Errorf("refs of a type no value has: exit %d\n%s", code, out)
	}
	code, out, _ = run(t, "", "refs", "-json", "-by", "value", list)
	var got struct {
		Values []struct {
			ID, Owner, Type string
			References      []struct{ Member, State string }
		}
	}
	if err := json.Unmarshal([]byte(out), &got); code != ExitOK || err != nil || len(got.Values) != 1 || got.Values[0].Owner != "B" ||
		got.Values[0].Type != "int" || len(got.Values[0].References) != 1 || got.Values[0].References[0].State != "confirmed" {
		t.Errorf("refs -json: exit %d, %v\n%s", code, err, out)
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gone := ln.Addr().String()
	ln.Close()
	code, out, errs = run(t, "", "refs", list+","+gone)
	if code != ExitFail || !strings.Contains(out, "member B: 1 values owned") || !strings.Contains(errs, "rrefgen refs: not reached: "+gone) {
		t.Errorf("a listener that does not answer: exit %d\n%s%s", code, out, errs)
	}

	for _, args := range [][]string{{"refs"}, {"refs", "-by", "owner", list}, {"refs", "-sort", "name", list}, {"refs", "a,,b"}, {"refs", "-timeout", "0s", list}} {
		code, _, errs := run(t, "", args...)
		if lines := strings.Split(strings.TrimSuffix(errs, "\n"), "\n"); code != ExitUsage || len(lines) != 2 ||
			!strings.HasPrefix(lines[0], "rrefgen refs: ") || !strings.Contains(lines[1], "rrefgen refs -h") {
			t.Errorf("%v: exit %d, want a one-line usage error and a hint:\n%s", args, code, errs)
		}
	}
	http.DefaultClient.CloseIdleConnections()
}
