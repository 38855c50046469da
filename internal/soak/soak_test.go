package soak

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/rrefkit/rref/runtime/worker"
)

func TestMain(m *testing.M) {
	// The members of the tests' groups are this test binary again.
	if IsMember() {
		os.Exit(ServeMember())
	}
	goleak.VerifyTestMain(m)
}

// testCommand starts members as this test binary, running no test.
var testCommand = []string{os.Args[0], "-test.run=^$"}

// Test sizes: a few seconds per group, so the package stays well under a
// minute with -race on 2 cores, where race-enabled members run 5-10x slower.
const (
	testTraffic = 3 * time.Second
	// testMinOps is far below what a round does (thousands without -race,
	// hundreds with it) and far above what a stuck group does.
	testMinOps = 100
)

func testOptions(transport string, faults ...string) Options {
	if faults == nil {
		faults = []string{}
	}
	return Options{Members: MinMembers, Transport: transport, Faults: faults, Rounds: 1, RoundTraffic: testTraffic,
		Seed: 1, Command: testCommand, Progress: func(string) {}}
}

func runSoak(t *testing.T, o Options) *Report {
	t.Helper()
	o.Progress = func(s string) { t.Log(s) }
	rep, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func describe(rep *Report) string {
	var b bytes.Buffer
	rep.WriteText(&b)
	return b.String()
}

// TestFaults runs one round of 3 members over each transport with a stop,
// a kill and, where there are tcp links, a reset: nothing may be wrong,
// hang, leak or fail unexpectedly, and the traffic and the faults must
// really have happened.
func TestFaults(t *testing.T) {
	for _, transport := range []string{TransportTCP, TransportSHM, TransportMixed} {
		t.Run(transport, func(t *testing.T) {
			o := testOptions(transport)
			o.Faults = defaultFaults(transport)
			for attempt := 1; ; attempt++ {
				rep := runSoak(t, o)
				if !rep.OK() {
					t.Fatalf("the soak failed:\n%s", describe(rep))
				}
				if rep.Rounds != 1 {
					t.Errorf("%d rounds, want 1", rep.Rounds)
				}
				if rep.GoroutinesMax == 0 {
					t.Errorf("no member's goroutines were sampled after its traffic")
				}
				short := trafficShortfall(rep, o.Faults)
				if short == "" {
					return
				}
				// Nothing went wrong, but the round did not show everything: a
				// loaded host ran too little traffic, or the seed's plan killed
				// a link's end before its reset. Another round, with another
				// seed, must.
				if attempt == testTrafficAttempts {
					t.Fatalf("%s, in each of %d rounds:\n%s", short, attempt, describe(rep))
				}
				t.Logf("round %d: %s; again with another seed", attempt, short)
				o.Seed++
			}
		})
	}
}

// testTrafficAttempts bounds the rounds TestFaults runs when one did not
// show every fault and operation: each must be right, one must show all.
const testTrafficAttempts = 3

// trafficShortfall says what a round lacked ("" for nothing): a fault
// never injected (a reset planned on a link whose end was killed first),
// too few operations, none after the kill, an operation or a runtime
// primitive never completed.
func trafficShortfall(rep *Report, faults []string) string {
	var miss []string
	for _, f := range faults {
		if rep.Faults[f] < 1 {
			miss = append(miss, fmt.Sprintf("no %s fault injected", f))
		}
	}
	if rep.TotalOK() < testMinOps {
		miss = append(miss, fmt.Sprintf("%d operations ok, want at least %d", rep.TotalOK(), testMinOps))
	}
	if rep.OKAfterKill == 0 {
		miss = append(miss, "no operation completed after the kill")
	}
	for _, k := range allOps {
		if rep.Ops[k].OK == 0 {
			miss = append(miss, "no "+k+" operation completed")
		}
	}
	for _, k := range allPrims {
		if rep.Calls[k] == 0 {
			miss = append(miss, "no "+k+" made")
		}
	}
	return strings.Join(miss, "; ")
}

// TestDetects proves the harness sees each kind of failure: a member that
// misbehaves once must make its counter positive and the run fail.
func TestDetects(t *testing.T) {
	for _, tc := range []struct {
		inject  string
		counter func(*Report) int
		adjust  func(*Options)
	}{
		{InjectWrong, func(r *Report) int { return r.Wrong }, nil},
		{InjectFail, func(r *Report) int { return r.Unexpected }, nil},
		{InjectHang, func(r *Report) int { return r.Hung }, func(o *Options) {
			// No stops here, so a short deadline is safe; the hang outlasts it.
			o.OpDeadline = time.Second
			o.HangFor = 2 * time.Second
		}},
		{InjectWrongUnhold, func(r *Report) int { return r.Wrong }, nil},
		{InjectLeak, func(r *Report) int { return r.Leaked }, func(o *Options) {
			o.ShutdownTimeout = time.Second // a leak holds Shutdown to its timeout
		}},
	} {
		t.Run(tc.inject, func(t *testing.T) {
			o := testOptions(TransportTCP)
			o.RoundTraffic = MinRoundTraffic
			o.Inject = tc.inject
			if tc.adjust != nil {
				tc.adjust(&o)
			}
			rep := runSoak(t, o)
			if tc.counter(rep) == 0 || rep.OK() {
				t.Fatalf("injected %s, and the report does not show it:\n%s", tc.inject, describe(rep))
			}
			if rep.TotalOK() == 0 {
				t.Errorf("no traffic besides the injection")
			}
		})
	}
}

// TestCommandExitStatus: the command's exit status is 1 when a value is
// wrong, and the report says why.
func TestCommandExitStatus(t *testing.T) {
	o := testOptions(TransportTCP)
	o.RoundTraffic = MinRoundTraffic
	o.Inject = InjectWrong
	var stdout, stderr bytes.Buffer
	if st := Command(context.Background(), &stdout, &stderr, Flags{Options: o}); st != exitFail {
		t.Errorf("exit status %d with a wrong value, want %d", st, exitFail)
	}
	out := stdout.String()
	for _, want := range []string{"WRONG", "FAIL", "reproduce: rrefgen soak", "add on"} {
		if !strings.Contains(out, want) {
			t.Errorf("the report lacks %q:\n%s", want, out)
		}
	}
	if !strings.Contains(stderr.String(), "seed 1") {
		t.Errorf("the seed is not printed first: %q", stderr.String())
	}
}

// TestFlags: bad flags are usage errors, never panics; good ones parse.
func TestFlags(t *testing.T) {
	parse := func(args ...string) (Flags, error) {
		fs := flag.NewFlagSet("soak", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		finish := BindFlags(fs)
		if err := fs.Parse(args); err != nil {
			return Flags{}, fmt.Errorf("%w: %v", ErrUsage, err)
		}
		return finish()
	}
	for _, args := range [][]string{
		{"-n", "2"}, {"-n", "9"}, {"-n", "0"}, {"-transport", "udp"}, {"-faults", "stop,explode"},
		{"-faults", "reset", "-transport", "shm"}, {"-faults", "stall", "-transport", "shm"}, {"-d", "0s"}, {"-d", "-1m"}, {"-round", "10ms"},
		{"-clients", "0"}, {"-deadline", "0s"}, {"-deadline", "1s"}, {"-rounds", "-1"}, {"-from", "0"},
		{"extra"}, {"-n", "many"}, {"-dead-after", "0s"}, {"-dead-after", "-1s"},
		// A pause lasts up to 2x DeadAfter: it must fit in the round, and
		// a call held by it in the deadline.
		{"-faults", "pause"}, {"-faults", "pause", "-dead-after", "3s"}, {"-faults", "pause", "-dead-after", "2s", "-deadline", "5s"},
	} {
		if _, err := parse(args...); !errors.Is(err, ErrUsage) {
			t.Errorf("%q: %v, want a usage error", args, err)
		} else if !strings.HasPrefix(err.Error(), "soak: ") {
			t.Errorf("%q: %q lacks the package prefix", args, err)
		}
	}
	fl, err := parse()
	if err != nil {
		t.Fatal(err)
	}
	if fl.Members != DefaultMembers || fl.Transport != TransportTCP || !slices.Equal(fl.Faults, DefaultFaults) || fl.Duration != DefaultDuration {
		t.Errorf("defaults: %+v", fl.Options)
	}
	if !slices.Equal(fl.Faults, DefaultFaults) || slices.Contains(fl.Faults, FaultPause) {
		t.Errorf("default faults over tcp %v, want every fault but pause %v", fl.Faults, DefaultFaults)
	}
	if fl, err := parse("-faults", "pause,stop", "-dead-after", "2s"); err != nil || fl.DeadAfter != 2*time.Second || !slices.Contains(fl.Faults, FaultPause) {
		t.Errorf("-faults pause -dead-after 2s: %+v, %v", fl.Options, err)
	}
	if fl, err := parse("-transport", "shm"); err != nil || !slices.Equal(fl.Faults, []string{FaultStop, FaultKill}) {
		t.Errorf("-transport shm: faults %v, %v; want the defaults without the tcp faults", fl.Faults, err)
	}
	fl, err = parse("-n", "8", "-transport", "mixed", "-faults", "kill,reset,kill", "-seed", "42", "-rounds", "3", "-json")
	if err != nil {
		t.Fatal(err)
	}
	if fl.Members != 8 || fl.Transport != TransportMixed || !slices.Equal(fl.Faults, []string{FaultKill, FaultReset}) ||
		fl.Seed != 42 || fl.Rounds != 3 || !fl.JSON {
		t.Errorf("parsed: %+v", fl)
	}
	if fl, err = parse("-faults", "none"); err != nil || len(fl.Faults) != 0 {
		t.Errorf("-faults none: %v %v", fl.Faults, err)
	}
}

// TestPlan: a round's plan follows from the seed and the round alone, the
// first round has every fault kind selected, and every fault fits its
// bounds.
func TestPlan(t *testing.T) {
	o := Options{Members: 6, Transport: TransportMixed, Faults: allFaults, Seed: 99, DeadAfter: 2 * time.Second}.withDefaults()
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	for round := 1; round <= 50; round++ {
		p := plan(o, round)
		if q := plan(o, round); fmt.Sprint(p) != fmt.Sprint(q) {
			t.Fatalf("round %d planned twice: %v, then %v", round, p, q)
		}
		seenTCP := false
		for i, s := range p.shm {
			if !s {
				if i > 0 && p.shm[i-1] {
					t.Fatalf("round %d: a tcp member after an shm one: %v", round, p.shm)
				}
				seenTCP = true
			}
		}
		if !seenTCP || !p.shm[len(p.shm)-1] {
			t.Errorf("round %d: mixed without both kinds: %v", round, p.shm)
		}
		kinds := map[string]int{}
		for _, e := range p.events {
			kinds[e.kind]++
			if e.at < 0 || e.at > p.traffic {
				t.Errorf("round %d: %s at %v, outside the traffic", round, e.kind, e.at)
			}
			if e.kind == FaultStop && (e.dur < MinStop || e.dur > MaxStop || e.at+e.dur > p.traffic) {
				t.Errorf("round %d: a stop of %v at %v", round, e.dur, e.at)
			}
			if (e.kind == FaultReset || e.kind == FaultStall) && !p.tcpLink(e.link[0], e.link[1]) {
				t.Errorf("round %d: a %s of shm link %v", round, e.kind, e.link)
			}
			if e.kind == FaultStall && (e.dur < MinStop || e.dur > MaxStop || e.at+e.dur > p.traffic) {
				t.Errorf("round %d: a stall of %v at %v", round, e.dur, e.at)
			}
			if e.kind == FaultPause && (float64(e.dur) < MinPause*float64(o.DeadAfter) || float64(e.dur) > MaxPause*float64(o.DeadAfter) || e.at+e.dur > p.traffic) {
				t.Errorf("round %d: a pause of %v at %v (DeadAfter %v)", round, e.dur, e.at, o.DeadAfter)
			}
		}
		if kinds[FaultKill] > maxKills(o.Members) {
			t.Errorf("round %d: %d kills", round, kinds[FaultKill])
		}
		if round == 1 {
			for _, f := range allFaults {
				if kinds[f] == 0 {
					t.Errorf("round 1 has no %s", f)
				}
			}
		}
	}
	other := o
	other.Seed++
	if fmt.Sprint(plan(o, 2)) == fmt.Sprint(plan(other, 2)) {
		t.Errorf("seeds %d and %d plan round 2 alike", o.Seed, other.Seed)
	}
}

// TestClassify: errors as the runtime returns them, directly and carried
// back as text from further down a chain.
func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{fmt.Errorf("%w: gone", worker.ErrPeerFailed), classPeer},
		{worker.ErrOwnerFailed, classPeer},
		{worker.ErrLost, classPeer},
		{&worker.UserError{Function: fnForward, Message: "soak: forward to m2: " + worker.ErrPeerFailed.Error() + ": x"}, classPeer},
		{context.DeadlineExceeded, classHung},
		{fmt.Errorf("%w (%w)", worker.ErrClosed, fmt.Errorf("%w: m0 took it for dead: no hello in time: context deadline exceeded", worker.ErrFenced)), classPeer},
		{&worker.UserError{Function: fnFetch, Message: markHung + " fetch from m1: context deadline exceeded"}, classHung},
		{expect(1, 2, "x"), classWrong},
		{&worker.UserError{Function: fnClone, Message: expect(1, 2, "clone").Error()}, classWrong},
		{worker.ErrDeleted, classOther},
		{worker.ErrUnknownFunction, classOther},
		{errors.New("soak: injected failure"), classOther},
	} {
		if got := classify(tc.err); got != tc.want {
			t.Errorf("classify(%v) = %s, want %s", tc.err, got, tc.want)
		}
	}
}

// TestPauseIsOneVerdict pauses a member past DeadAfter in a round of 4
// members over shm and tcp: the group fences it everywhere or nowhere
// (a member paused so used to be fenced by its shm peers alone, and the
// tcp member then leaked the references it held for it), only operations
// that involve it fail, and nothing leaks.
func TestPauseIsOneVerdict(t *testing.T) {
	o := testOptions(TransportMixed)
	o.Members = 4
	o.Faults = []string{FaultPause}
	o.DeadAfter = 500 * time.Millisecond
	o.RoundTraffic = 3 * time.Second
	// The case that split: a member on shared memory paused, its shm peer's
	// heartbeat fencing it while the tcp members' kernels kept answering.
	// The first seed whose plan pauses an shm member beside another.
	for o.Seed = 1; ; o.Seed++ {
		p := plan(o.withDefaults(), 1)
		shm := 0
		for _, s := range p.shm {
			if s {
				shm++
			}
		}
		if i := slices.IndexFunc(p.events, func(e faultEvent) bool { return e.kind == FaultPause }); i >= 0 && p.shm[p.events[i].member] && shm >= 2 {
			break
		}
	}
	rep := runSoak(t, o)
	if !rep.OK() {
		t.Fatalf("the soak failed:\n%s", describe(rep))
	}
	if rep.Faults[FaultPause] != 1 || rep.PausedFenced != 1 {
		t.Fatalf("%d pauses, %d fenced, %d alive; want one, fenced by its shm peer's heartbeat and so by all:\n%s", rep.Faults[FaultPause], rep.PausedFenced, rep.PausedAlive, describe(rep))
	}
	t.Logf("fenced %d, alive %d, %d ops ok, %d failed by the fence", rep.PausedFenced, rep.PausedAlive, rep.TotalOK(), rep.FailedKill)
}

// TestBlame: a failure beside a kill is excused only when it could come from
// the kill: its error names a member killed or fenced by then, the member
// that saw it was, or it is a lost RRef naming no one.
func TestBlame(t *testing.T) {
	rr := &roundRun{names: memberNames(4), kills: []killRecord{{member: 2, at: 100}}}
	for _, tc := range []struct {
		member int
		end    int64
		err    string
		want   bool
	}{
		{0, 200, "worker: owner failed: m2", true},
		{0, 200, "worker: peer failed: hand on m1: worker: owner failed: m2", true},
		{0, 200, "worker: owner failed: m1", false},          // m1 lives: not the kill's doing
		{0, 200, "worker: owner failed", false},              // names no one
		{0, 50, "worker: owner failed: m2", false},           // before the kill
		{0, 200, "worker: owner failed: m22", false},         // a name is a whole word
		{2, 200, "worker: peer failed: call to m1: x", true}, // seen by the member fenced
		{0, 200, worker.ErrLost.Error(), true},               // a lost RRef names no one
		{1, 200, "worker: peer failed: fetch on m3: worker failed", false},
	} {
		f := failure{Member: tc.member, End: tc.end, Err: tc.err}
		if got := rr.blamesKilled(f); got != tc.want {
			t.Errorf("member m%d, at %d, %q: blames the kill %v, want %v", tc.member, tc.end, tc.err, got, tc.want)
		}
	}
}
