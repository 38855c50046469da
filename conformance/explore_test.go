package conformance

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rrefkit/rref/explore"
	"github.com/rrefkit/rref/generated/rref"
	"github.com/rrefkit/rref/runtime/core"
)

// TestCorpus explores every scenario exhaustively, bounded so the default test
// run stays short; rrefgen conformance runs it unbounded.
func TestCorpus(t *testing.T) {
	scs, err := Corpus()
	if err != nil {
		t.Fatal(err)
	}
	if len(scs) < 40 {
		t.Errorf("the corpus has %d scenarios; keep at least 40", len(scs))
	}
	for _, sc := range scs {
		if sc.Comment == "" {
			t.Errorf("%s does not open with a comment saying what it checks", sc.Name)
		}
		r := Explore(sc, Options{MaxStates: 20000, Timeout: 5 * time.Second})
		if !r.Passed() {
			t.Errorf("%s: %v\n  %s\n  schedule: %s", sc.Name, r.Violation, strings.Join(r.Trace, "\n  "), r.ScheduleString())
		}
	}
}

func TestRandomAndPCTWalksPass(t *testing.T) {
	scs, _ := Corpus()
	for _, sc := range scs {
		for _, mode := range []Mode{Random, PCT} {
			r := Explore(sc, Options{Mode: mode, Walks: 20, Seed: 1})
			if !r.Passed() || r.Schedules != 20 {
				t.Errorf("%s %s: %v after %v walks", sc.Name, mode, r.Violation, r.Schedules)
			}
		}
	}
}

const brokenScenario = `# A scenario that expects the wrong value: it must fail with a trace.
workers A B
remote A B r 7
fetch A r
expect value A r 8
`

func TestFailureReportsShortestTraceAndReplays(t *testing.T) {
	sc, err := Parse("broken.rref", []byte(brokenScenario))
	if err != nil {
		t.Fatal(err)
	}
	r := Explore(sc, Options{})
	if r.Passed() || r.Violation.Invariant != "expect" || r.Violation.Line != 5 {
		t.Fatalf("want an expect failure at line 5, got %v", r.Violation)
	}
	// remote, fetch, RemoteCall, FetchCall, FetchRet, expect: six steps at least.
	if len(r.Trace) != 6 {
		t.Errorf("shortest trace has %d steps, want 6:\n%s", len(r.Trace), strings.Join(r.Trace, "\n"))
	}
	sched, err := ParseSchedule(r.ScheduleString())
	if err != nil {
		t.Fatal(err)
	}
	again := Replay(sc, sched, nil)
	if again.Violation == nil || again.Violation.Error() != r.Violation.Error() {
		t.Fatalf("replay gave %v, want %v", again.Violation, r.Violation)
	}
	w := Explore(sc, Options{Mode: Random, Seed: 42, Walks: 5})
	if w.Passed() || w.Seed != 42 {
		t.Fatalf("random walk: %v seed %d", w.Violation, w.Seed)
	}
}

func TestStuckScenarioIsL1(t *testing.T) {
	sc, err := Parse("stuck.rref", []byte("workers A B\nremote A B r 1\ncrash B\nfetch A r\nexpect value A r 1\n"))
	if err != nil {
		t.Fatal(err)
	}
	r := Explore(sc, Options{})
	if r.Passed() {
		t.Fatal("a fetch that gets owner-failed cannot satisfy expect value")
	}
	sc2, _ := Parse("wait.rref", []byte("workers A B\nfetch A nothing\n"))
	r2 := Explore(sc2, Options{})
	if r2.Passed() || r2.Violation.Invariant != "L1" {
		t.Fatalf("waiting for a handle that never comes: %v", r2.Violation)
	}
}

func TestParseErrors(t *testing.T) {
	cases := map[string]string{
		"new A x 1\n":                               "first command must be \"workers\"",
		"workers A\nnew B x 1\n":                    "2: unknown worker \"B\"",
		"workers A\nnew A x one\n":                  "2: bad integer \"one\"",
		"workers A\nfrob A\n":                       "2: unknown command \"frob\"",
		"workers A\nexpect error A x nope\n":        "unknown error kind \"nope\"",
		"workers A\nexpect count A apples 1\n":      "unknown counter \"apples\"",
		"workers A\nrelease A\n":                    "release takes 2 arguments",
		"workers A A\n":                             "declared twice",
		"workers A\nworkers B\n":                    "workers declared twice",
		"workers A\nduplicate A A Nope\n":           "unknown message type \"Nope\"",
		"workers A\nexpect clean now\n":             "expect clean takes no arguments",
		"workers A\nexpect wonder\n":                "unknown expectation",
		"workers A\nremote A A 9x 1\n":              "bad handle name",
		"":                                          "no \"workers\" line",
		"# only a comment\n":                        "no \"workers\" line",
		"workers A\nnew A x 1 # trailing comment\n": "",
	}
	for src, want := range cases {
		_, err := Parse("t.rref", []byte(src))
		switch {
		case want == "" && err != nil:
			t.Errorf("%q: unexpected error %v", src, err)
		case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
			t.Errorf("%q: got %v, want an error containing %q", src, err, want)
		}
	}
}

func BenchmarkExhaustiveCorpus(b *testing.B) {
	scs, _ := Corpus()
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		states := 0
		for _, sc := range scs {
			states += Explore(sc, Options{}).States
		}
		b.ReportMetric(float64(states), "states/op")
	}
}

// TestMonitorsBindToSpecInvariants: every invariant a monitor reports is one
// the RRef spec declares, and every declared invariant has a monitor.
func TestMonitorsBindToSpecInvariants(t *testing.T) {
	// The monitors live in monitor.go, but a check may sit beside what it
	// checks: read every source file of the package.
	names, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var src []byte
	for _, n := range names {
		if strings.HasSuffix(n, "_test.go") {
			continue
		}
		b, err := os.ReadFile(n)
		if err != nil {
			t.Fatal(err)
		}
		src = append(src, b...)
	}
	for _, inv := range rref.Invariants {
		if !strings.Contains(string(src), "rref.Invariant"+inv.Name) {
			t.Errorf("invariant %s (%s) has no monitor", inv.Name, inv.Text)
		}
	}
	if strings.Contains(string(src), `w.fail("S`) || strings.Contains(string(src), `w.fail("L`) {
		t.Error("a monitor names an invariant by a literal instead of the spec's constant")
	}
}

// TestStateEncodingIsUnambiguous: states that differ only in how a handle's
// name, its number, a fetched value and its error would run together, or
// in which values are exempt, encode differently (they once merged, which
// made the search skip states it had never seen).
func TestStateEncodingIsUnambiguous(t *testing.T) {
	makeWorld := func(name string, id core.HandleID, value string, err rref.ErrorKind, exempt RRefID) *world {
		w := &world{p: newRunState(), mon: newMonitor(), scratch: new([]byte), fp: new(explore.Footprint)}
		k := handleKey{1, name}
		w.p.setHandle(w.fp, k, &progHandle{id: id})
		w.p.setFetch(w.fp, k, &fetchState{done: true, value: []byte(value), err: err})
		w.mon.markExemptRRef(w.fp, exempt)
		return w
	}
	base := makeWorld("c", 12, "1", 23, RRefID{Worker: 1, Local: 1})
	for what, other := range map[string]*world{
		"name and handle":  makeWorld("c1", 2, "1", 23, RRefID{Worker: 1, Local: 1}),
		"value and error":  makeWorld("c", 12, "12", 3, RRefID{Worker: 1, Local: 1}),
		"exempt value set": makeWorld("c", 12, "1", 23, RRefID{Worker: 1, Local: 2}),
	} {
		if string(base.AppendState(nil)) == string(other.AppendState(nil)) {
			t.Errorf("%s: two states encode alike: %q", what, base.AppendState(nil))
		}
	}
}

// TestBoundsHoldOnWideScenarios: with hundreds of workers one state's
// successors take long to build, and a search used to check its time
// bound only every 1024 new states, running minutes past it. The bound
// is now checked at every state: the search stops soon after it, says it
// is incomplete, and fails nothing; a search this long reports progress.
func TestBoundsHoldOnWideScenarios(t *testing.T) {
	const workers = 300
	var b strings.Builder
	b.WriteString("# wide: a crash tells hundreds of workers, in any order\nworkers")
	for i := range workers {
		fmt.Fprintf(&b, " W%d", i)
	}
	b.WriteString("\nremote W0 W1 x 1\ncrash W2\nsettle\n")
	sc, err := Parse("wide.rref", []byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	const bound = ProgressEvery + ProgressEvery/4
	reports := 0
	begin := time.Now()
	r := Explore(sc, Options{Timeout: bound, Progress: func(int, time.Duration) { reports++ }})
	took := time.Since(begin)
	if reports == 0 {
		t.Errorf("a %v search reported no progress", bound)
	}
	if !r.Passed() || !strings.Contains(r.Truncated, "time bound") {
		t.Fatalf("violation %v, truncated %q; want a search the time bound stopped", r.Violation, r.Truncated)
	}
	// Generous: one state of this scenario takes milliseconds, not seconds.
	if took > 20*bound {
		t.Errorf("a %v bound stopped the search after %v", bound, took)
	}
}

// TestReductionKeepsVerdicts: a reduction changes how many states the
// search visits, never what it concludes. On every scenario of the corpus
// the verdict, and the invariant violated if any, is the same with the
// reductions on and off, and the reduced search visits no more states.
// (TestMutants makes the same comparison with each seeded bug.)
func TestReductionKeepsVerdicts(t *testing.T) {
	scs, err := Corpus()
	if err != nil {
		t.Fatal(err)
	}
	compared, reduced, unreduced := 0, 0, 0
	for _, sc := range scs {
		opt := Options{MaxStates: 6000, Timeout: 20 * time.Second}
		r := Explore(sc, opt)
		opt.Unreduced = true
		u := Explore(sc, opt)
		if r.Truncated != "" || u.Truncated != "" {
			continue // too large for the default run; rrefgen conformance -unreduced compares it
		}
		compared++
		reduced, unreduced = reduced+r.States, unreduced+u.States
		if verdict(r) != verdict(u) {
			t.Errorf("%s: %s reduced, %s unreduced", sc.Name, verdict(r), verdict(u))
		}
		if r.States > u.States {
			t.Errorf("%s: %d states reduced, %d unreduced", sc.Name, r.States, u.States)
		}
	}
	if compared < 40 {
		t.Errorf("only %d scenarios compared", compared)
	}
	t.Logf("%d scenarios: %d states reduced, %d unreduced", compared, reduced, unreduced)
}

// verdict is what a search concluded: pass, or the invariant it violated.
func verdict(r Result) string {
	if r.Violation == nil {
		return "pass"
	}
	return "violates " + r.Violation.Invariant
}

// TestEnumeratedProgramsPass explores every program of up to three commands
// over two workers (with the postlude): each passes, none is written twice,
// and the count is the generator's known one, so a change to it shows.
func TestEnumeratedProgramsPass(t *testing.T) {
	seen := map[string]bool{}
	states := 0
	n := Enumerate(Bound{Workers: 2, Commands: 3}, func(sc *Scenario) bool {
		body := sc.Source
		if seen[body] {
			t.Errorf("written twice:\n%s", body)
		}
		seen[body] = true
		r := Explore(sc, Options{MaxStates: 20000, Timeout: 20 * time.Second})
		states += r.States
		if !r.Passed() || r.Truncated != "" {
			t.Errorf("%v (%s)\n%s", r.Violation, r.Truncated, body)
		}
		return !t.Failed()
	})
	if n != 637 { // with advance and the resends of RemoteCall and ForkRequest
		t.Errorf("%d programs within 2 workers and 3 commands, want 637", n)
	}
	t.Logf("%d programs, %d states", n, states)
}

// TestCoverageOfAScenario: a value made remotely and released before its
// creator's fork is confirmed steps the owner from absent to pending and
// the fork from unknown to known; the report lists every machine of the
// spec, in its order, whichever the scenario steps; the transitions taken
// do not depend on the sleep sets, which skip orders, not states.
func TestCoverageOfAScenario(t *testing.T) {
	sc, err := Parse("covered", []byte("# remote, then released at once\nworkers A B\nremote A B r 1\nrelease A r\nsettle\nexpect clean\n"))
	if err != nil {
		t.Fatal(err)
	}
	reduced := Explore(sc, Options{Coverage: true})
	every := Explore(sc, Options{Coverage: true, NoSleepSets: true})
	if !reduced.Passed() || reduced.Coverage == nil || len(reduced.Coverage.Machines) != len(rref.Machines) {
		t.Fatalf("%v, coverage %+v", reduced.Violation, reduced.Coverage)
	}
	for i, m := range reduced.Coverage.Machines {
		if m.Info != rref.Machines[i] {
			t.Errorf("machine %d is %s, the spec's is %s", i, m.Info.Name, rref.Machines[i].Name)
		}
	}
	report := reduced.Coverage.Report()
	for _, want := range []string{"absent --Create--> pending", "unknown --Create--> known"} {
		if i := strings.Index(report, want); i < 0 || strings.HasPrefix(strings.TrimSpace(report[i+len(want):]), "never") {
			t.Errorf("%q not taken:\n%s", want, report)
		}
	}
	if a, b := fmt.Sprint(reduced.Coverage.NotTaken()), fmt.Sprint(every.Coverage.NotTaken()); a != b {
		t.Errorf("not taken under sleep sets %s, without %s", a, b)
	}
}
