package cli

import (
	"encoding/json"
	"flag"
	"fmt"
	"github.com/rrefkit/rref/fifo"
	"io"
	"os"
	goruntime "runtime"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/rrefkit/rref/conformance"
	"github.com/rrefkit/rref/explore"
	"github.com/rrefkit/rref/generated/rref"
)

func init() {
	register(command{"conformance", "explore scenario interleavings and check the invariants (the main job)", runConformance})
}

type jsonRow struct {
	Scenario     string   `json:"scenario"`
	Mode         string   `json:"mode"`
	Result       string   `json:"result"`
	Schedules    float64  `json:"schedules"` // 0 when reduced: not counted
	Reduced      bool     `json:"reduced,omitempty"`
	States       int      `json:"states"`
	Transitions  int64    `json:"transitions"`
	Seconds      float64  `json:"seconds"`
	StatesPerSec float64  `json:"states_per_second"`
	Invariant    string   `json:"invariant,omitempty"`
	Detail       string   `json:"detail,omitempty"`
	Trace        []string `json:"trace,omitempty"`
	Schedule     string   `json:"schedule,omitempty"`
	CycleTrace   []string `json:"cycle_trace,omitempty"` // a liveness failure's cycle, after the trace
	Cycle        string   `json:"cycle,omitempty"`
	Seed         int64    `json:"seed,omitempty"`
	Truncated    string   `json:"truncated,omitempty"`
	NotShortest  string   `json:"not_shortest,omitempty"` // why the schedule is not known to be the shortest that fails
	Stack        string   `json:"stack,omitempty"`        // of a panic in the code under test
}

// searchGCPercent is the GC target while the conformance command searches
// (GOGC, when set, wins).
const searchGCPercent = 400

func runConformance(env *Env, args []string) int {
	fs := newFlags(env, "conformance", "[flags] [file or folder ...]", `
Runs scenario files (the corpus: conformance/testdata) against the protocol core in a
simulated network that may deliver any in-flight message next. By default it
explores every interleaving of the embedded corpus, with state hashing. A
failure prints the violated invariant, the shortest failing schedule (or why
it is not known to be the shortest: a bound stopped the search for it, or the
walks do not look for it) and a -replay string (and a -seed for random and pct
walks); a panic in the code under test is a failure too, with its stack. Exit status 1 when
any scenario fails, 3 when none failed but a bound (-timeout, -max-states, -max-memory)
stopped an exhaustive search short: that is not a proof.`)
	mode := fs.String("mode", "exhaustive", "exhaustive, random or pct")
	walks := fs.Int("walks", 1000, "random and pct: schedules per scenario")
	seed := fs.Int64("seed", 1, "random and pct: the first walk's seed")
	maxStates := fs.Int("max-states", 2_000_000, "exhaustive: distinct states per scenario before giving up")
	maxMemory := fs.Int("max-memory", 8192, "exhaustive: MiB of live heap before giving up")
	timeout := fs.Duration("timeout", 2*time.Minute, "time bound per scenario")
	unreduced := fs.Bool("unreduced", false, "explore every order of the steps the reductions treat as commuting (slower; to check the reductions)")
	asJSON := fs.Bool("json", false, "print one JSON object per scenario instead of a table")
	replay := fs.String("replay", "", "replay one schedule (as printed by a failure) of the one scenario named")
	enumerate := fs.String("enumerate", "", "WxN: explore every program of up to N commands over up to W workers, written once up to renaming (e.g. 3x3), instead of scenario files")
	quiet := fs.Bool("q", false, "no progress bar")
	coverage := fs.Bool("coverage", false, "after the results, list per machine of the RRef spec the transitions the searches took and those they never did (as TLC's -coverage)")
	workers := fs.Int("workers", goruntime.GOMAXPROCS(0), "exhaustive: goroutines searching: several scenarios or programs run side by side, one each; one scenario alone runs on one unless this is given, and is then shared out among them (verdicts and counts do not depend on it)")
	target := fs.String("target", "core", "core (the pure protocol core, every interleaving) or runtime (real workers over -transport, random message delays)")
	runs := fs.Int("runs", 20, "runtime target: runs per scenario, each with its own seed")
	transport := fs.String("transport", "mem", "runtime target: mem (one group in memory), shm (each pair over shared memory) or fabric (each pair over libfabric, in a build with -tags rreffabric; fabric:PROVIDER names libfabric's provider)")
	if st := parseFlags(env, fs, args); st >= 0 {
		return st
	}
	if *maxMemory < 1 {
		return usageError(env, "conformance", "-max-memory %d: want at least 1 (MiB)", *maxMemory)
	}
	if *timeout <= 0 {
		// A bound of no time would stop every search at once, to report
		// each scenario incomplete.
		return usageError(env, "conformance", "-timeout %v: want a positive time", *timeout)
	}
	if os.Getenv("GOGC") == "" {
		// A search allocates a copy of each state it steps to and keeps
		// few: collecting less often buys about a fifth of its time.
		defer debug.SetGCPercent(debug.SetGCPercent(searchGCPercent))
	}
	if *target != "core" && *target != "runtime" {
		return usageError(env, "conformance", "unknown -target %q (core or runtime)", *target)
	}
	// A flag the run would ignore is refused: a user who set it believes
	// it took effect (testing shared memory, say).
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	for _, name := range []string{"runs", "transport"} {
		if set[name] && *target != "runtime" {
			return usageError(env, "conformance", "-%s applies to -target runtime only", name)
		}
	}
	for _, name := range []string{"walks", "seed"} {
		if set[name] && (*mode == "exhaustive" && *target == "core") {
			return usageError(env, "conformance", "-%s applies to -mode random or pct (and -seed to -target runtime)", name)
		}
	}
	// The runtime target runs each scenario -runs times on real workers:
	// the search's flags mean nothing to it.
	for _, name := range []string{"mode", "walks", "json", "enumerate", "replay", "max-states", "max-memory", "timeout", "unreduced", "workers", "coverage"} {
		if set[name] && *target == "runtime" {
			return usageError(env, "conformance", "-%s does not apply to -target runtime", name)
		}
	}
	if set["json"] && *enumerate != "" {
		return usageError(env, "conformance", "-json does not apply to -enumerate")
	}
	// The report is a table after the rows: not JSON, and nothing to add
	// to the one schedule a replay prints.
	if *coverage && (*asJSON || *replay != "") {
		return usageError(env, "conformance", "-coverage does not apply to -json or -replay")
	}
	for name, v := range map[string]int{"runs": *runs, "walks": *walks, "max-states": *maxStates, "workers": *workers} {
		if v < 1 {
			return usageError(env, "conformance", "-%s %d: want at least 1", name, v)
		}
	}
	m := conformance.Mode(*mode)
	if m != conformance.Exhaustive && m != conformance.Random && m != conformance.PCT {
		return usageError(env, "conformance", "unknown -mode %q (exhaustive, random or pct)", *mode)
	}
	var scs []*conformance.Scenario
	var err error
	if fs.NArg() == 0 {
		scs, err = conformance.Corpus()
	} else {
		scs, err = loadScenarios(env, fs.Args())
	}
	if err != nil {
		fmt.Fprintf(env.Stderr, "rrefgen conformance: %v\n", err)
		return ExitFail
	}
	if *target == "runtime" {
		provider, onFabric := conformance.FabricTransport(*transport)
		if *transport != "mem" && *transport != "shm" && !onFabric {
			return usageError(env, "conformance", "unknown -transport %q (mem, shm, fabric or fabric:PROVIDER)", *transport)
		}
		if onFabric {
			have, err := fifo.FabricProviders()
			if err == nil && provider != "" && !slices.Contains(have, provider) {
				err = fmt.Errorf("libfabric offers no provider %q here (it offers %s)", provider, strings.Join(have, ", "))
			}
			if err != nil {
				return usageError(env, "conformance", "-transport %s: %v", *transport, err)
			}
		}
		return runRuntimeTarget(env, scs, *transport, *runs, *seed)
	}
	// One recording for the whole run: the searches run side by side, and
	// the report is of them all (the searches for shorter failing
	// schedules included).
	var rec *explore.CoverageRecorder
	if *coverage {
		rec = explore.StartCoverage(rref.Machines...)
	}
	reportCoverage := func() {
		if rec != nil {
			fmt.Fprint(env.Stdout, "\n"+rec.Stop().Report())
		}
	}
	if *enumerate != "" {
		var b conformance.Bound
		if _, err := fmt.Sscanf(*enumerate, "%dx%d", &b.Workers, &b.Commands); err != nil || b.Workers < 1 || b.Workers > 26 || b.Commands < 1 {
			return usageError(env, "conformance", "-enumerate %q: want WORKERSxCOMMANDS, such as 3x3 (1 to 26 workers)", *enumerate)
		}
		st := runEnumerate(env, b, conformance.Options{MaxStates: *maxStates, MaxMemory: uint64(*maxMemory) << 20, Timeout: *timeout, Unreduced: *unreduced, Workers: *workers}, *quiet)
		reportCoverage()
		return st
	}
	if *replay != "" {
		if len(scs) != 1 {
			return usageError(env, "conformance", "-replay needs exactly one scenario file")
		}
		sched, err := conformance.ParseSchedule(*replay)
		if err != nil {
			return usageError(env, "conformance", "-replay %q: %v", *replay, err)
		}
		r := conformance.Replay(scs[0], sched, nil)
		for i, step := range r.Trace {
			fmt.Fprintf(env.Stdout, "%3d  %s\n", i+1, step)
		}
		if r.Violation != nil {
			fmt.Fprintf(env.Stdout, "FAIL %s\n", r.Violation)
			failureNotes(env.Stdout, r.Result)
			return ExitFail
		}
		fmt.Fprintln(env.Stdout, "ok: the schedule ran without a violation")
		return ExitOK
	}

	opt := conformance.Options{Mode: m, Walks: *walks, Seed: *seed, MaxStates: *maxStates, MaxMemory: uint64(*maxMemory) << 20, Timeout: *timeout, Unreduced: *unreduced, Workers: *workers}
	var optFor func(*conformance.Scenario, conformance.Options) conformance.Options
	if !*quiet && !*asJSON {
		// A search longer than a few seconds says how far it got, on stderr.
		optFor = func(sc *conformance.Scenario, o conformance.Options) conformance.Options {
			o.Progress = func(states int, elapsed time.Duration) {
				fmt.Fprintf(env.Stderr, "rrefgen conformance: %s: %d states after %v (%.0f states/s)\n",
					sc.Name, states, elapsed.Round(time.Second), float64(states)/elapsed.Seconds())
			}
			return o
		}
	}
	progress := !*quiet && !*asJSON && isTerminal(env.Stderr)
	start := time.Now()
	failed, bounded, totalStates := 0, 0, 0
	var totalSchedules float64
	reduced := false // some search skipped orders, so schedules were not all counted
	if !*asJSON {
		fmt.Fprintf(env.Stdout, "%-*s %-10s %14s %9s %9s %12s  %s\n", nameWidth(scs), "scenario", "mode", "schedules", "states", "time", "states/s", "result")
	}
	enc := json.NewEncoder(env.Stdout)
	showBar := func(i int) {
		if progress && i < len(scs) {
			bar := strings.Repeat("#", (i*30)/len(scs)) + strings.Repeat(".", 30-(i*30)/len(scs))
			fmt.Fprintf(env.Stderr, "\r[%s] %d/%d %-40s", bar, i, len(scs), scs[i].Name)
		}
	}
	showBar(0)
	reported := 0
	report := func(sc *conformance.Scenario, r conformance.Result) bool {
		reported++
		totalStates += r.States
		totalSchedules += r.Schedules
		reduced = reduced || r.Reduced
		secs := r.Duration.Seconds()
		rate := 0.0
		if secs > 0 {
			rate = float64(r.States) / secs
		}
		result := "ok"
		if !r.Passed() {
			result = "FAIL"
			failed++
		} else if r.Truncated != "" {
			result = "INCOMPLETE (" + r.Truncated + ")"
			if m == conformance.Exhaustive {
				bounded++
			}
		}
		if *asJSON {
			row := jsonRow{Scenario: sc.Name, Mode: string(r.Mode), Result: result, Schedules: r.Schedules, Reduced: r.Reduced, States: r.States, Transitions: r.Transitions,
				Seconds: secs, StatesPerSec: rate, Truncated: r.Truncated}
			if r.Violation != nil {
				row.Invariant, row.Detail, row.Trace, row.Schedule = r.Violation.Invariant, r.Violation.Detail, r.Trace, r.ScheduleString()
				row.NotShortest, row.Stack = r.NotShortest, r.Violation.Stack
				row.CycleTrace, row.Cycle = r.CycleTrace, r.CycleString()
				if m != conformance.Exhaustive {
					row.Seed = r.Seed
				}
			}
			enc.Encode(row)
			return true
		}
		if progress {
			fmt.Fprint(env.Stderr, "\r"+strings.Repeat(" ", 80)+"\r")
		}
		schedules := fmt.Sprintf("%.4g", r.Schedules)
		if r.Reduced {
			schedules = "-"
		}
		fmt.Fprintf(env.Stdout, "%-*s %-10s %14s %9d %9s %12.0f  %s\n", nameWidth(scs), sc.Name, r.Mode, schedules, r.States, r.Duration.Round(time.Millisecond), rate, result)
		if r.Violation != nil {
			fmt.Fprintf(env.Stdout, "    violated %s\n", r.Violation)
			for j, step := range r.Trace {
				fmt.Fprintf(env.Stdout, "    %3d  %s\n", j+1, step)
			}
			failureNotes(env.Stdout, r.Result)
			fmt.Fprintf(env.Stdout, "    replay: rrefgen conformance -replay %s %s\n", r.ScheduleString(), sc.Name)
			if m != conformance.Exhaustive {
				fmt.Fprintf(env.Stdout, "    seed: %d (rrefgen conformance -mode %s -seed %d -walks 1 %s)\n", r.Seed, m, r.Seed, sc.Name)
			}
		}
		showBar(reported)
		return true
	}
	if len(scs) == 1 {
		// One search: its states are shared out among the goroutines
		// when -workers asks for it. By default it runs on one: two
		// goroutines on one search mostly explore the same states twice
		// (the six-user chain took 234-299 ms on two, 213-271 on one).
		o := opt
		if !set["workers"] {
			o.Workers = 1
		}
		if optFor != nil {
			o = optFor(scs[0], o)
		}
		report(scs[0], conformance.Explore(scs[0], o))
	} else {
		// Several: side by side, one goroutine each, reported in order.
		conformance.ExploreEach(slices.Values(scs), *workers, opt, optFor, report)
	}
	elapsed := time.Since(start)
	if !*asJSON {
		fmt.Fprintf(env.Stdout, "\n%s: %d passed, %d failed", count(len(scs), "scenario"), len(scs)-failed-bounded, failed)
		if bounded > 0 {
			fmt.Fprintf(env.Stdout, ", %d incomplete (a bound stopped the search: raise -timeout, -max-states or -max-memory)", bounded)
		}
		if reduced {
			fmt.Fprintf(env.Stdout, "; %d states in %v (%.0f states/s)\n", totalStates, elapsed.Round(time.Millisecond), float64(totalStates)/elapsed.Seconds())
		} else {
			fmt.Fprintf(env.Stdout, "; %.4g schedules, %d states in %v (%.0f states/s)\n",
				totalSchedules, totalStates, elapsed.Round(time.Millisecond), float64(totalStates)/elapsed.Seconds())
		}
		if m == conformance.Exhaustive {
			fmt.Fprintln(env.Stdout, "A schedule is one order of every step of a run (commands, deliveries); a state is the whole system between two steps,")
			fmt.Fprintln(env.Stdout, "counted once however many schedules reach it. Every step is checked against S1-S5 and every end against L1-L2")
			fmt.Fprintln(env.Stdout, "(conformance/README.md says what each means).")
			if reduced {
				fmt.Fprintln(env.Stdout, "Every state was entered, but orders of steps that commute were skipped, so schedules (-) were not counted:")
				fmt.Fprintln(env.Stdout, "-unreduced walks and counts them all.")
			}
		}
	}
	reportCoverage()
	switch {
	case failed > 0:
		return ExitFail
	case bounded > 0:
		return ExitIncomplete
	}
	return ExitOK
}

// isTerminal reports whether w is a character device (a progress bar is
// pointless in files and CI logs).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// runRuntimeTarget runs scenarios against real workers.
func runRuntimeTarget(env *Env, scs []*conformance.Scenario, transport string, runs int, seed int64) int {
	width := nameWidth(scs)
	fmt.Fprintf(env.Stdout, "%-*s %6s %9s  %s\n", width, "scenario", "runs", "time", "result")
	failed, skipped := 0, 0
	for _, sc := range scs {
		r := conformance.ExploreRuntimeOver(sc, transport, runs, seed)
		switch {
		case r.Skipped != "":
			skipped++
			fmt.Fprintf(env.Stdout, "%-*s %6s %9s  skipped: %s\n", width, sc.Name, "-", "-", r.Skipped)
		case r.Violation != nil:
			failed++
			fmt.Fprintf(env.Stdout, "%-*s %6d %9s  FAIL\n    violated %s\n    seed: %d (rrefgen conformance -target runtime -runs 1 -seed %d %s)\n",
				width, sc.Name, r.Runs, r.Duration.Round(time.Millisecond), r.Violation, r.Seed, r.Seed, sc.Name)
		default:
			fmt.Fprintf(env.Stdout, "%-*s %6d %9s  ok\n", width, sc.Name, r.Runs, r.Duration.Round(time.Millisecond))
		}
	}
	ran := len(scs) - skipped
	fmt.Fprintf(env.Stdout, "\n%s on the runtime (%d skipped): %d passed, %d failed\n", count(ran, "scenario"), skipped, ran-failed, failed)
	if failed > 0 {
		return ExitFail
	}
	return ExitOK
}

// runEnumerate explores every program within b and stops at the first that
// fails, printing it with its trace; opt bounds each program's search.
func runEnumerate(env *Env, b conformance.Bound, opt conformance.Options, quiet bool) int {
	start, last := time.Now(), time.Now()
	states, incomplete, programs := 0, 0, 0
	var failed *conformance.Scenario
	var fr conformance.Result
	programsOf := func(yield func(*conformance.Scenario) bool) { conformance.Enumerate(b, yield) }
	n := conformance.ExploreEach(programsOf, opt.Workers, opt, nil, func(sc *conformance.Scenario, r conformance.Result) bool {
		programs++
		states += r.States
		if r.Truncated != "" {
			incomplete++
		}
		if !r.Passed() {
			failed, fr = sc, r
			return false
		}
		if !quiet && time.Since(last) >= conformance.ProgressEvery {
			last = time.Now()
			fmt.Fprintf(env.Stderr, "rrefgen conformance: %d programs so far, %d states, %v\n", programs, states, time.Since(start).Round(time.Second))
		}
		return true
	})
	elapsed := time.Since(start)
	fmt.Fprintf(env.Stdout, "enumerated %d programs of up to %d commands over up to %d workers: %d states in %v (%.0f states/s)\n",
		n, b.Commands, b.Workers, states, elapsed.Round(time.Millisecond), float64(states)/elapsed.Seconds())
	if failed != nil {
		fmt.Fprintf(env.Stdout, "FAIL %s: violated %s\n", failed.Name, fr.Violation)
		for j, step := range fr.Trace {
			fmt.Fprintf(env.Stdout, "    %3d  %s\n", j+1, step)
		}
		failureNotes(env.Stdout, fr.Result)
		fmt.Fprintf(env.Stdout, "the program (save it as a .rref file; rrefgen conformance -replay %s FILE replays the trace):\n%s", fr.ScheduleString(), failed.Source)
		return ExitFail
	}
	if incomplete > 0 {
		fmt.Fprintf(env.Stdout, "%d programs incomplete: a bound stopped their search (raise -timeout, -max-states or -max-memory)\n", incomplete)
		return ExitIncomplete
	}
	fmt.Fprintln(env.Stdout, "ok: every program passed")
	return ExitOK
}

// loadScenarios reads the named scenario files and folders; a name that is
// no file but names a scenario of the embedded corpus (as a failure of the
// corpus prints it, for -replay) is that scenario.
func loadScenarios(env *Env, names []string) ([]*conformance.Scenario, error) {
	var corpus map[string]*conformance.Scenario
	var out []*conformance.Scenario
	for _, n := range names {
		if _, err := os.Stat(env.abs(n)); err != nil {
			if corpus == nil {
				corpus = map[string]*conformance.Scenario{}
				all, cerr := conformance.Corpus()
				if cerr != nil {
					return nil, cerr
				}
				for _, sc := range all {
					corpus[sc.Name] = sc
				}
			}
			if sc := corpus[n]; sc != nil {
				out = append(out, sc)
				continue
			}
		}
		scs, err := conformance.Load([]string{env.abs(n)})
		if err != nil {
			return nil, err
		}
		if len(scs) == 0 {
			// A folder of no scenarios must not pass as a check that ran.
			return nil, fmt.Errorf("%s: no scenario (*.rref) in it", n)
		}
		out = append(out, scs...)
	}
	return out, nil
}

// count is n and noun, plural unless n is one.
func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// nameWidth is the scenario column's width: the longest name, at least 36.
func nameWidth(scs []*conformance.Scenario) int {
	w := 36
	for _, sc := range scs {
		w = max(w, len(sc.Name))
	}
	return w
}

// failureNotes prints what a failure carries beside its trace: the cycle
// of a liveness failure, why its schedule is not known to be the shortest
// that fails, and the stack of a panic in the code under test.
func failureNotes(out io.Writer, r explore.Result) {
	if len(r.Cycle) > 0 {
		// A liveness failure is a lasso: the trace leads into a cycle of
		// hot states, which the run may go round forever.
		fmt.Fprintf(out, "    then, back to the state after step %d, forever:\n", len(r.Trace))
		for j, step := range r.CycleTrace {
			fmt.Fprintf(out, "    %3d  %s\n", len(r.Trace)+j+1, step)
		}
		fmt.Fprintf(out, "    cycle: %s (explore.ReplayLasso replays the schedule, then the cycle)\n", r.CycleString())
	}
	if r.NotShortest != "" {
		fmt.Fprintf(out, "    not known to be the shortest failing schedule: %s\n", r.NotShortest)
	}
	if r.Violation != nil && r.Violation.Stack != "" {
		fmt.Fprintln(out, "    stack of the panic:")
		for _, line := range strings.Split(strings.TrimRight(r.Violation.Stack, "\n"), "\n") {
			fmt.Fprintf(out, "      %s\n", line)
		}
	}
}
