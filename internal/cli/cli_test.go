package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rrefkit/rref/explore"
)

func run(t *testing.T, dir string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := Main(&Env{Stdout: &out, Stderr: &errb, Dir: dir}, args)
	return code, out.String(), errb.String()
}

func TestUsageAndUnknownCommand(t *testing.T) {
	if code, _, errs := run(t, ""); code != ExitUsage || !strings.Contains(errs, "usage:") {
		t.Errorf("no args: %d %q", code, errs)
	}
	if code, _, errs := run(t, "", "frobnicate"); code != ExitUsage || !strings.Contains(errs, `unknown command "frobnicate"`) {
		t.Errorf("unknown: %d %q", code, errs)
	}
	if code, out, _ := run(t, "", "help"); code != ExitOK || !strings.Contains(out, "gen") || !strings.Contains(out, "graph") {
		t.Errorf("help: %d %q", code, out)
	}
	for _, c := range []string{"gen", "check", "graph"} {
		if code, out, _ := run(t, "", c, "-h"); code != ExitOK || !strings.Contains(out, "usage: rrefgen "+c) {
			t.Errorf("%s -h: %d %q", c, code, out)
		}
		if code, _, _ := run(t, "", c, "-nosuchflag"); code != ExitUsage {
			t.Errorf("%s -nosuchflag: exit %d, want %d", c, code, ExitUsage)
		}
	}
}

func TestCheck(t *testing.T) {
	code, out, errs := run(t, "", "check")
	if code != ExitOK || !strings.Contains(out, "ok  spec/rref.rspec: protocol rref v4") {
		t.Fatalf("check embedded: %d %q %q", code, out, errs)
	}
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.rspec")
	os.WriteFile(bad, []byte("protocol p;\nversion 1;\nmessage A = 1 { x: Nope; }\n"), 0o644)
	code, _, errs = run(t, dir, "check", "bad.rspec")
	if code != ExitFail || !strings.Contains(errs, "bad.rspec:3:20: unknown type \"Nope\"") {
		t.Fatalf("check bad: %d %q", code, errs)
	}
	if code, _, errs := run(t, dir, "check", "missing.rspec"); code != ExitFail || !strings.Contains(errs, "missing.rspec") {
		t.Fatalf("check missing: %d %q", code, errs)
	}
}

func TestGraph(t *testing.T) {
	// The whole protocol is one document: one digraph with a title, a
	// cluster per machine and a legend; one Mermaid diagram likewise.
	code, out, _ := run(t, "", "graph")
	if code != ExitOK || strings.Count(out, "digraph ") != 1 || strings.Count(out, "subgraph ") != 5 ||
		!strings.Contains(out, `label="protocol rref, version 4: state machines"`) || !strings.Contains(out, "cluster legend") {
		t.Fatalf("graph: %d %q", code, out)
	}
	if dot, err := exec.LookPath("dot"); err == nil {
		cmd := exec.Command(dot, "-Tsvg")
		cmd.Stdin = strings.NewReader(out)
		svg, err := cmd.CombinedOutput()
		if err != nil || strings.Count(string(svg), "<svg") != 1 {
			t.Fatalf("dot -Tsvg: %v\n%.500s", err, svg)
		}
	} else {
		t.Log("Graphviz is not installed: the DOT document is not rendered")
	}
	code, out, _ = run(t, "", "graph", "-format", "mermaid")
	if code != ExitOK || strings.Count(out, "stateDiagram-v2") != 1 || !strings.HasPrefix(out, "---\ntitle: protocol rref, version 4") ||
		!strings.Contains(out, "state ChildPin {") || !strings.Contains(out, "note right of Fork") {
		t.Fatalf("graph mermaid: %d %q", code, out)
	}
	code, out, _ = run(t, "", "graph", "-format", "mermaid", "-machine", "Fork")
	if code != ExitOK || !strings.HasPrefix(out, "stateDiagram-v2") || !strings.Contains(out, "unknown --> known: Create, Request") {
		t.Fatalf("graph mermaid: %d %q", code, out)
	}
	if code, _, errs := run(t, "", "graph", "-machine", "Nope"); code != ExitFail || !strings.Contains(errs, "have Fork, Owner, User, ChildPin") {
		t.Fatalf("graph unknown machine: %d %q", code, errs)
	}
	if code, _, _ := run(t, "", "graph", "-format", "png"); code != ExitUsage {
		t.Fatalf("graph -format png: %d", code)
	}
}

func TestGenWritesAndChecks(t *testing.T) {
	dir := t.TempDir()
	src := "protocol tiny;\nversion 1;\nmessage Ping = 1 { id: u64; }\n"
	os.WriteFile(filepath.Join(dir, "tiny.rspec"), []byte(src), 0o644)
	args := []string{"-out", "out", "-pkg", "example.com/tiny"}
	if code, _, errs := run(t, dir, append(append([]string{"gen", "-check"}, args...), "tiny.rspec")...); code != ExitFail || !strings.Contains(errs, "stale") {
		t.Fatalf("check before gen: %d %q", code, errs)
	}
	if code, out, errs := run(t, dir, append(append([]string{"gen"}, args...), "tiny.rspec")...); code != ExitOK || !strings.Contains(out, "wrote") {
		t.Fatalf("gen: %d %q %q", code, out, errs)
	}
	if code, out, errs := run(t, dir, append(append([]string{"gen", "-check"}, args...), "tiny.rspec")...); code != ExitOK {
		t.Fatalf("check after gen: %d %q %q", code, out, errs)
	}
	// A hand edit is caught, with a diff.
	p := filepath.Join(dir, "out", "messages.go")
	data, _ := os.ReadFile(p)
	os.WriteFile(p, bytes.Replace(data, []byte("Ping"), []byte("Pong"), 1), 0o644)
	code, out, _ := run(t, dir, append(append([]string{"gen", "-check"}, args...), "tiny.rspec")...)
	if code != ExitFail || !strings.Contains(out, "stale: ") || !strings.Contains(out, "messages.go") {
		t.Fatalf("check after edit: %d %q", code, out)
	}
	// A file the generator no longer produces is reported, and removed by gen.
	extra := filepath.Join(dir, "out", "old.go")
	os.WriteFile(extra, []byte("// Code generated by rrefgen. DO NOT EDIT.\npackage tiny\n"), 0o644)
	code, out, _ = run(t, dir, append(append([]string{"gen", "-check"}, args...), "tiny.rspec")...)
	if code != ExitFail || !strings.Contains(out, "extra: ") {
		t.Fatalf("check with extra file: %d %q", code, out)
	}
	run(t, dir, append(append([]string{"gen"}, args...), "tiny.rspec")...)
	if _, err := os.Stat(extra); !os.IsNotExist(err) {
		t.Fatalf("gen left a stale generated file behind")
	}
}

func TestGenCheckOfThisRepository(t *testing.T) {
	code, out, errs := run(t, "", "gen", "-check")
	if code != ExitOK {
		t.Fatalf("generated/ is stale (run go generate ./generated):\n%s%s", out, errs)
	}
}

func TestConformanceCorpusPasses(t *testing.T) {
	// Bounded to stay short: a scenario the bound stops is incomplete, not failed.
	code, out, errs := run(t, "", "conformance", "-q", "-max-states", "20000")
	if code != ExitOK && code != ExitIncomplete || !strings.Contains(out, " 0 failed") || !strings.Contains(out, "seed_flow4_user_to_user.rref") {
		t.Fatalf("conformance: %d\n%s%s", code, out, errs)
	}
}

// TestConformanceBoundedIsIncomplete: a search a bound stopped is not a
// pass: its row says INCOMPLETE and the exit status is 3, not 0.
func TestConformanceBoundedIsIncomplete(t *testing.T) {
	code, out, errs := run(t, "", "conformance", "-q", "-max-states", "5")
	if code != ExitIncomplete || !strings.Contains(out, "INCOMPLETE (state bound 5 reached)") || !strings.Contains(out, "incomplete") {
		t.Fatalf("conformance -max-states 5: exit %d\n%s%s", code, out, errs)
	}
}

func TestConformanceFailureAndReplay(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "bad.rref"), []byte("# wrong on purpose\nworkers A B\nremote A B r 7\nfetch A r\nexpect value A r 8\n"), 0o644)
	code, out, _ := run(t, dir, "conformance", "bad.rref")
	if code != ExitFail || !strings.Contains(out, "violated expect at line 5") || !strings.Contains(out, "replay: rrefgen conformance -replay ") || strings.Contains(out, "not known to be the shortest") {
		t.Fatalf("failure report: %d\n%s", code, out)
	}
	i := strings.Index(out, "-replay ") + len("-replay ")
	sched := strings.Fields(out[i:])[0]
	code, out, _ = run(t, dir, "conformance", "-replay", sched, "bad.rref")
	if code != ExitFail || !strings.Contains(out, "FAIL expect at line 5") {
		t.Fatalf("replay: %d\n%s", code, out)
	}
	code, out, _ = run(t, dir, "conformance", "-json", "-mode", "random", "-walks", "3", "bad.rref")
	if code != ExitFail || !strings.Contains(out, `"invariant":"expect"`) || !strings.Contains(out, `"seed":1`) || !strings.Contains(out, `"not_shortest":"random walks`) {
		t.Fatalf("json random: %d\n%s", code, out)
	}
	// A walk's failure is the first it met: the report says so.
	code, out, _ = run(t, dir, "conformance", "-mode", "pct", "-walks", "3", "bad.rref")
	if code != ExitFail || !strings.Contains(out, "not known to be the shortest failing schedule: pct walks report the first") {
		t.Fatalf("pct: %d\n%s", code, out)
	}
	os.WriteFile(filepath.Join(dir, "malformed.rref"), []byte("workers A\nfrob A\n"), 0o644)
	if code, _, errs := run(t, dir, "conformance", "malformed.rref"); code != ExitFail || !strings.Contains(errs, "malformed.rref:2: unknown command") {
		t.Fatalf("malformed: %d %q", code, errs)
	}
	if code, _, _ := run(t, dir, "conformance", "-mode", "sideways"); code != ExitUsage {
		t.Fatalf("bad mode: %d", code)
	}
}

func TestConformanceRuntimeTarget(t *testing.T) {
	code, out, errs := run(t, "", "conformance", "-target", "runtime", "-runs", "1")
	if code != ExitOK || !strings.Contains(out, "seed_flow4_user_to_user.rref") || !strings.Contains(out, " 0 failed") {
		t.Fatalf("runtime target: %d\n%s%s", code, out, errs)
	}
	if code, _, _ := run(t, "", "conformance", "-target", "moon"); code != ExitUsage {
		t.Fatalf("bad target: %d", code)
	}
}

// TestConformanceOneScenarioOnOneGoroutine: a single scenario is searched
// on one goroutine unless -workers says otherwise, as its transitions
// show: one goroutine takes the same number every time, several take more
// (they cover some states twice).
func TestConformanceOneScenarioOnOneGoroutine(t *testing.T) {
	path := filepath.Join("..", "..", "conformance", "testdata", "crashed_parent_cut_child_passes.rref")
	transitions := func(args ...string) int64 {
		t.Helper()
		code, out, errs := run(t, "", append([]string{"conformance", "-q", "-json"}, append(args, path)...)...)
		var row struct{ Transitions int64 }
		if code != ExitOK || json.Unmarshal([]byte(out), &row) != nil {
			t.Fatalf("conformance %v: %d\n%s%s", args, code, out, errs)
		}
		return row.Transitions
	}
	one := transitions("-workers", "1")
	if got := transitions(); got != one {
		t.Errorf("by default: %d transitions, one goroutine takes %d", got, one)
	}
	several := one
	for range 5 {
		if several = transitions("-workers", "4"); several != one {
			break
		}
	}
	if several == one {
		t.Errorf("-workers 4 took exactly one goroutine's %d transitions five times: was it ignored?", one)
	}
}

// TestConformanceEnumerate: -enumerate explores every small program and
// says how many; a malformed bound is a usage error.
func TestConformanceEnumerate(t *testing.T) {
	code, out, errs := run(t, "", "conformance", "-q", "-enumerate", "2x2")
	if code != ExitOK || !strings.Contains(out, "enumerated ") || !strings.Contains(out, "ok: every program passed") {
		t.Fatalf("conformance -enumerate 2x2: exit %d\n%s%s", code, out, errs)
	}
	if code, _, _ := run(t, "", "conformance", "-enumerate", "3"); code != ExitUsage {
		t.Errorf("-enumerate 3: exit %d, want %d", code, ExitUsage)
	}
}

// TestGenPkgAndInitialisms: -pkg is the import path the output declares,
// and -initialisms spells the words given in capitals, in check as in gen.
func TestGenPkgAndInitialisms(t *testing.T) {
	dir := t.TempDir()
	src := "protocol vms;\nversion 1;\nmessage vm_info = 1 { vm_id: u64; }\n"
	os.WriteFile(filepath.Join(dir, "vms.rspec"), []byte(src), 0o644)
	code, out, errs := run(t, dir, "gen", "-out", "out", "-pkg", "example.com/x/vms", "-initialisms", "vm, gpu", "vms.rspec")
	if code != ExitOK {
		t.Fatalf("gen: %d %q %q", code, out, errs)
	}
	data, err := os.ReadFile(filepath.Join(dir, "out", "messages.go"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`package vms // import "example.com/x/vms"`, "type VMInfo struct", "VMID uint64"} {
		if !strings.Contains(string(data), want) {
			t.Errorf("messages.go lacks %q", want)
		}
	}
	// Without the initialism the two names differ: check agrees with gen.
	if code, out, _ := run(t, dir, "check", "vms.rspec"); code != ExitOK || !strings.Contains(out, "ok") {
		t.Fatalf("check: %d %q", code, out)
	}
	clash := "protocol vms;\nversion 1;\nmessage VMInfo = 1 { }\nmessage vm_info = 2 { }\n"
	os.WriteFile(filepath.Join(dir, "clash.rspec"), []byte(clash), 0o644)
	if code, _, _ := run(t, dir, "check", "clash.rspec"); code != ExitOK {
		t.Fatalf("without -initialisms VMInfo and VmInfo are two names")
	}
	if code, _, errs := run(t, dir, "check", "-initialisms", "vm", "clash.rspec"); code != ExitFail || !strings.Contains(errs, "clash.rspec:4:9") {
		t.Fatalf("with -initialisms vm they collide: %d %q", code, errs)
	}
}

// TestGenPkgDoesNotNameThePackage: the package is named by the protocol,
// whatever -pkg's last element, and gen -h says so (it once said the last
// element named it).
func TestGenPkgDoesNotNameThePackage(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "vms.rspec"), []byte("protocol vms;\nversion 1;\nmessage A = 1 { x: u8; }\n"), 0o644)
	if code, out, errs := run(t, dir, "gen", "-out", "out", "-pkg", "example.com/x/other", "vms.rspec"); code != ExitOK {
		t.Fatalf("gen: %d %q %q", code, out, errs)
	}
	data, err := os.ReadFile(filepath.Join(dir, "out", "messages.go"))
	if err != nil {
		t.Fatal(err)
	}
	if want := `package vms // import "example.com/x/other"`; !strings.Contains(string(data), want) {
		t.Errorf("messages.go lacks %q", want)
	}
	_, help, _ := run(t, dir, "gen", "-h")
	if strings.Contains(help, "last element names") || !strings.Contains(help, "the package's name is the protocol's") {
		t.Errorf("gen -h misnames what names the package:\n%s", help)
	}
}

// TestHelpAndFlagPlacement: every command's -h prints its help once, on
// stdout, and exits 0 (bench too); help CMD is CMD -h; flags may follow the
// spec files; a bad flag is named once on stderr; a missing scenario file
// is reported with the command's name.
func TestHelpAndFlagPlacement(t *testing.T) {
	dir := t.TempDir()
	for _, c := range commands {
		code, out, errs := run(t, dir, c.name, "-h")
		if code != ExitOK || strings.Count(out, "usage: rrefgen "+c.name) != 1 || errs != "" {
			t.Errorf("%s -h: exit %d, usage printed %d times on stdout, stderr %q", c.name, code, strings.Count(out, "usage: rrefgen "+c.name), errs)
		}
	}
	if code, out, _ := run(t, dir, "help", "gen"); code != ExitOK || !strings.Contains(out, "usage: rrefgen gen") {
		t.Errorf("help gen: %d %q", code, out)
	}
	if code, _, errs := run(t, dir, "help", "nope"); code != ExitUsage || !strings.Contains(errs, `unknown command "nope"`) {
		t.Errorf("help nope: %d %q", code, errs)
	}
	os.WriteFile(filepath.Join(dir, "v.rspec"), []byte("protocol v;\nversion 1;\nmessage vm_info = 1 { }\n"), 0o644)
	if code, out, errs := run(t, dir, "check", "v.rspec", "-initialisms", "vm"); code != ExitOK || !strings.Contains(out, "ok") {
		t.Errorf("a flag after the spec: %d %q %q", code, out, errs)
	}
	if code, _, errs := run(t, dir, "check", "-bogus"); code != ExitUsage || strings.Count(errs, "-bogus") != 1 || !strings.HasPrefix(errs, "rrefgen check: ") {
		t.Errorf("a bad flag: %d %q", code, errs)
	}
	if code, _, errs := run(t, dir, "conformance", "nosuch.rref"); code != ExitFail || !strings.HasPrefix(errs, "rrefgen conformance: ") {
		t.Errorf("a missing scenario: %d %q", code, errs)
	}
	if code, _, errs := run(t, dir, "bench"); code != ExitUsage || !strings.Contains(errs, "fifo or rpc") {
		t.Errorf("bench with nothing named: %d %q", code, errs)
	}
	if code, _, errs := run(t, dir, "bench", "fifo", "-only", "tcp"); code != ExitUsage || !strings.Contains(errs, "apply to bench rpc") {
		t.Errorf("bench fifo -only: %d %q", code, errs)
	}
	if code, _, errs := run(t, dir, "bench", "rpc", "-cells", "1,17", "-d", "1ms"); code != ExitUsage || !strings.Contains(errs, `unknown cell "17"`) {
		t.Errorf("bench rpc -cells with an unknown cell: %d %q", code, errs)
	}
	if code, _, errs := run(t, dir, "bench", "fifo", "-cells", "1"); code != ExitUsage || !strings.Contains(errs, "apply to bench rpc") {
		t.Errorf("bench fifo -cells: %d %q", code, errs)
	}
	if code, _, errs := run(t, dir, "bench", "rpc", "-only", "carrier pigeon", "-d", "1ms"); code != ExitUsage || !strings.Contains(errs, "names none") {
		t.Errorf("bench rpc -only matching nothing: %d %q", code, errs)
	}
}

// TestReplayHintOfTheCorpusRuns: a failing corpus scenario's replay hint
// names it as the corpus does, and that name runs from any folder.
func TestReplayHintOfTheCorpusRuns(t *testing.T) {
	dir := t.TempDir()
	if code, out, errs := run(t, dir, "conformance", "-q", "two_fetches.rref"); code != ExitOK || !strings.Contains(out, "two_fetches.rref") {
		t.Fatalf("a corpus name: %d %q %q", code, out, errs)
	}
	if code, out, _ := run(t, dir, "conformance", "-replay", "0,0", "two_fetches.rref"); code != ExitOK || !strings.Contains(out, "ok: the schedule ran") {
		t.Fatalf("replay of a corpus name: %d %q", code, out)
	}
}

// A liveness failure is printed as a lasso: its trace, then the cycle
// numbered on from it, and the cycle's schedule.
func TestFailureNotesPrintTheLasso(t *testing.T) {
	r := explore.Result{
		Violation:  &explore.Violation{Invariant: explore.LivenessInvariant, Detail: "a cycle of hot states"},
		Trace:      []string{"the client asks"},
		Schedule:   []int{0},
		CycleTrace: []string{"the timer expires", "the client resends"},
		Cycle:      []int{1, 1},
	}
	var b bytes.Buffer
	failureNotes(&b, r)
	want := "    then, back to the state after step 1, forever:\n" +
		"      2  the timer expires\n" +
		"      3  the client resends\n" +
		"    cycle: 1,1 (explore.ReplayLasso replays the schedule, then the cycle)\n"
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
}

// TestConformanceCoverage: a program that makes a value on its own worker
// and frees it steps the owner's machine twice, absent to ready to deleted,
// and nothing else: the report after the results says so, every other
// transition never taken. -coverage with -json is refused.
func TestConformanceCoverage(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "local.rref"), []byte("# a local value, made and freed\nworkers A\nnew A h 1\nrelease A h\nsettle\nexpect clean\n"), 0o644)
	code, out, errs := run(t, dir, "conformance", "-q", "-coverage", "local.rref")
	if code != ExitOK {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
	for _, want := range []string{"coverage: 2 of 42 spec transitions taken", "machine Fork: 0 of 8", "machine Owner: 2 of 12", "absent --Local--> ready", "ready --Free--> deleted"} {
		if !strings.Contains(out, want) {
			t.Errorf("the report lacks %q:\n%s", want, out)
		}
	}
	if strings.Count(out, "never") != 40 {
		t.Errorf("want 40 transitions never taken:\n%s", out)
	}
	if code, _, _ := run(t, dir, "conformance", "-coverage", "-json", "local.rref"); code != ExitUsage {
		t.Errorf("-coverage -json: exit %d, want %d", code, ExitUsage)
	}
}
