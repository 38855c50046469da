package scenario

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// fake is a target whose state a test sets by hand; it records the
// effects the interpreter asked for.
type fake struct {
	did     []string
	dead    map[string]bool
	holds   map[string]bool
	fetched map[string]Fetched
	quiet   bool
	busy    string
	counts  Counters
	unclean string
	refuse  error
}

func newFake() *fake {
	return &fake{dead: map[string]bool{}, holds: map[string]bool{}, fetched: map[string]Fetched{}, quiet: true}
}

func (f *fake) do(s string) error { f.did = append(f.did, s); return f.refuse }

func (f *fake) New(w, x string, v int64) error { f.holds[w+x] = true; return f.do("new " + w + x) }
func (f *fake) Remote(w, o, x string, v int64, fail bool) error {
	f.holds[w+x] = true
	return f.do("remote " + w + o + x)
}
func (f *fake) Pass(w, to, x, y string) error         { return f.do("pass " + w + to + x + y) }
func (f *fake) Return(w, c, x, y string) error        { return f.do("return " + w + c + x + y) }
func (f *fake) Fetch(w, x string) error               { return f.do("fetch " + w + x) }
func (f *fake) Release(w, x string) error             { return f.do("release " + w + x) }
func (f *fake) Timeout(w, x string) error             { return f.do("timeout " + w + x) }
func (f *fake) Advance(w string, n int64) error       { return f.do(fmt.Sprintf("advance %s%d", w, n)) }
func (f *fake) Crash(w string) error                  { f.dead[w] = true; return f.do("crash " + w) }
func (f *fake) Duplicate(from, to, kind string) error { return f.do("duplicate " + from + to + kind) }
func (f *fake) Settle() error                         { return f.do("settle") }
func (f *fake) Alive(w string) bool                   { return !f.dead[w] }
func (f *fake) Holds(w, x string) bool                { return f.holds[w+x] }
func (f *fake) Fetched(w, x string) Fetched           { return f.fetched[w+x] }
func (f *fake) Quiet() bool                           { return f.quiet }
func (f *fake) Busy() string                          { return f.busy }
func (f *fake) Counters(w string) (Counters, error)   { return f.counts, nil }
func (f *fake) Unclean() string                       { return f.unclean }

func program(t *testing.T, src string) Program {
	t.Helper()
	sc, err := Parse("t.rref", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	return NewProgram(sc)
}

// TestReadyWaitsForWhatACommandNeeds: each command waits for its handle,
// settle for quiet, an expectation for its fetch, every command for a
// running return, and a dead worker's command forever.
func TestReadyWaitsForWhatACommandNeeds(t *testing.T) {
	p := program(t, "workers A B\npass A B x y\nsettle\nexpect value B y 1\nfetch A x\n")
	f := newFake()
	if p.Ready(f) {
		t.Fatal("pass ran before A held x")
	}
	f.holds["Ax"] = true
	f.busy = "a return waits"
	if p.Ready(f) || !strings.Contains(p.Blocked(f), "a return waits") {
		t.Fatalf("ran while busy: %s", p.Blocked(f))
	}
	f.busy = ""
	if !p.Ready(f) || p.Step(f) != nil || f.did[0] != "pass ABxy" {
		t.Fatalf("pass: %v", f.did)
	}
	f.quiet = false
	if p.Ready(f) {
		t.Fatal("settle ran with messages in flight")
	}
	f.quiet = true
	p.Step(f)
	if p.Ready(f) {
		t.Fatal("expect ran before the fetch completed")
	}
	f.fetched["By"] = Fetched{Issued: true, Done: true, Value: "1"}
	if v := p.Step(f); v != nil {
		t.Fatal(v)
	}
	f.dead["A"] = true
	if p.Ready(f) {
		t.Fatal("a dead worker fetched")
	}
}

func TestExpectations(t *testing.T) {
	cases := []struct {
		line string
		got  Fetched
		want string // "" passes; else in the violation
	}{
		{"expect value A x 1", Fetched{Done: true, Value: "1"}, ""},
		{"expect value A x 1", Fetched{Done: true, Value: "2"}, "got value 2, want value 1"},
		{"expect value A x 1", Fetched{Done: true, Kind: "lost"}, "got error lost"},
		{"expect error A x lost", Fetched{Done: true, Kind: "lost"}, ""},
		{"expect error A x lost", Fetched{Done: true, Value: "1"}, "want error lost"},
		{"expect either A x 1 deleted", Fetched{Done: true, Kind: "deleted"}, ""},
		{"expect either A x 1 deleted", Fetched{Done: true, Value: "1"}, ""},
		{"expect either A x 1 deleted", Fetched{Done: true, Kind: "lost"}, "want value 1 or error deleted"},
	}
	for _, tc := range cases {
		p := program(t, "workers A\n"+tc.line+"\n")
		f := newFake()
		f.fetched["Ax"] = tc.got
		v := p.Step(f)
		switch {
		case tc.want == "" && v != nil:
			t.Errorf("%s with %v: %v", tc.line, tc.got, v)
		case tc.want != "" && (v == nil || v.Invariant != "expect" || !strings.Contains(v.Detail, tc.want)):
			t.Errorf("%s with %v: %v, want %q", tc.line, tc.got, v, tc.want)
		}
	}
	p := program(t, "workers A\nexpect count A forks 2\nexpect clean\n")
	f := newFake()
	f.counts.Forks, f.unclean = 1, "A holds a fork"
	if v := p.Step(f); v == nil || !strings.Contains(v.Detail, "forks is 1, want 2") {
		t.Errorf("count: %v", v)
	}
	if v := p.Step(f); v == nil || !strings.Contains(v.Detail, "A holds a fork") {
		t.Errorf("clean: %v", v)
	}
}

// TestEndChecks: the program's own end checks: commands left (L1), a live
// worker's fetch never completed (L1), a value other than the one the
// fetched handle holds (S4), a user error where the function succeeded
// (S4), and a value where it failed (S4). What a handle holds is the
// target's to say: a name may be bound again.
func TestEndChecks(t *testing.T) {
	src := "workers A B\nremote A B z 5\nfetch A z\nremote A B f fail\nfetch A f\n"
	five := Holding{Known: true, Value: "5"}
	failing := Holding{Known: true, Fail: true}
	ok := Fetched{Done: true, Value: "5", Holds: five}
	userErr := Fetched{Done: true, Kind: "user", Holds: failing}
	cases := []struct {
		z, f Fetched
		want string
	}{
		{ok, userErr, ""},
		{Fetched{Issued: true, Holds: five}, userErr, "L1"},
		{Fetched{Done: true, Value: "6", Holds: five}, userErr, "S4"},
		{Fetched{Done: true, Kind: "user", Holds: five}, userErr, "S4"},
		{ok, Fetched{Done: true, Value: "0", Holds: failing}, "S4"},
		{Fetched{Done: true, Value: "6"}, userErr, ""}, // the target knows nothing of it: no check
	}
	for _, tc := range cases {
		p := program(t, src)
		f := newFake()
		for !p.Done() {
			if v := p.Step(f); v != nil {
				t.Fatal(v)
			}
		}
		f.fetched["Az"], f.fetched["Af"] = tc.z, tc.f
		v := p.End(f)
		if (v == nil) != (tc.want == "") || v != nil && v.Invariant != tc.want {
			t.Errorf("%v, %v: %v, want %q", tc.z, tc.f, v, tc.want)
		}
	}
	p := program(t, "workers A\nfetch A x\n")
	if v := p.End(newFake()); v == nil || v.Invariant != "L1" || !strings.Contains(v.Detail, "can never proceed") {
		t.Errorf("a command left: %v", v)
	}
}

// TestRefusedEffectIsL1: a target that cannot do a command says why, and
// the run reports it at the command's line.
func TestRefusedEffectIsL1(t *testing.T) {
	p := program(t, "workers A B\n\nduplicate A B ForkAck\n")
	f := newFake()
	f.refuse = errors.New("no duplicates here")
	v := p.Step(f)
	if v == nil || v.Line != 3 || !strings.Contains(v.Detail, "no duplicates here") {
		t.Fatalf("got %v", v)
	}
}

func TestParseCommand(t *testing.T) {
	c, err := ParseCommand([]string{"A", "B"}, "remote A B x fail")
	if err != nil || c.Op != OpRemote || !c.Fail || c.V != "B" {
		t.Fatalf("%+v %v", c, err)
	}
	for _, bad := range []string{"", "workers A", "remote A Z x 1", "new A 9x 1", "fetch A", "dance A"} {
		if _, err := ParseCommand([]string{"A", "B"}, bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// TestAdvance: "advance N" moves every worker's clock, "advance W N" W's
// alone, by 1 to MaxAdvance ticks; anything else is refused with its line.
func TestAdvance(t *testing.T) {
	for text, want := range map[string]string{"advance 40": "advance 40", "advance B 3": "advance B3"} {
		c, err := ParseCommand([]string{"A", "B"}, text)
		if err != nil {
			t.Fatalf("%q: %v", text, err)
		}
		f := newFake()
		if err := Exec(f, &c); err != nil || len(f.did) != 1 || f.did[0] != want {
			t.Errorf("%q did %v, %v; want %q", text, f.did, err, want)
		}
	}
	for text, want := range map[string]string{
		"advance":        "takes 1 or 2 arguments",
		"advance A B 3":  "takes 1 or 2 arguments",
		"advance 0":      "want 1 to 1000",
		"advance 1001":   "want 1 to 1000",
		"advance Z 3":    "unknown worker",
		"advance A soon": "bad integer",
	} {
		if _, err := ParseCommand([]string{"A", "B"}, text); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", text, err, want)
		}
	}
	// A worker's advance waits for its worker, as every command does.
	p := program(t, "workers A B\nadvance A 2\n")
	f := newFake()
	f.dead["A"] = true
	if p.Ready(f) {
		t.Error("a dead worker's clock advanced")
	}
}
