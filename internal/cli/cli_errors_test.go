package cli

import (
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
)

// fakeModule is a folder that findModuleRoot takes for this module's root,
// so gen writes there, not into the committed generated/ packages.
func fakeModule(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module "+ModulePath+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// gen -pkg without -out rewrote both committed generated/ packages with the
// import path given (issue 34). It is refused, and nothing is written.
func TestGenPkgWithoutOutRefused(t *testing.T) {
	dir := fakeModule(t)
	for _, args := range [][]string{{"gen", "-pkg", "example.com/x"}, {"gen", "-check", "-pkg", "example.com/x"}} {
		code, out, errs := run(t, dir, args...)
		if code != ExitUsage || !strings.Contains(errs, "-out") {
			t.Errorf("%v: exit %d, %q %q; want a usage error asking for -out", args, code, out, errs)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "generated")); !os.IsNotExist(err) {
		t.Errorf("gen -pkg without -out wrote generated/ (%v)", err)
	}
}

// gen's and graph's errors said "rrefgen check:" (and gen's outside the
// module "rrefgen:"): each command's errors carry its own name.
func TestEachCommandPrefixesItsErrors(t *testing.T) {
	for _, c := range []string{"gen", "graph", "check"} {
		code, _, errs := run(t, t.TempDir(), c, "missing.rspec")
		if code != ExitFail || !strings.HasPrefix(errs, "rrefgen "+c+": ") {
			t.Errorf("%s of a missing spec: exit %d, %q; want it prefixed rrefgen %s:", c, code, errs, c)
		}
	}
	outside := t.TempDir() // no go.mod of this module above it
	if code, _, errs := run(t, outside, "gen"); code != ExitFail || !strings.HasPrefix(errs, "rrefgen gen: not inside") {
		t.Errorf("gen outside the module: exit %d, %q", code, errs)
	}
	dir := fakeModule(t)
	if code, out, errs := run(t, dir, "gen"); code != ExitOK || !strings.HasPrefix(out, "rrefgen gen: wrote ") {
		t.Errorf("gen into a module: exit %d, %q %q", code, out, errs)
	}
}

// bench fifo -d 0 printed -9223372036854776.00 and conformance
// -timeout=-1s was taken: every duration and count flag is checked before
// anything runs.
func TestDurationAndCountFlagsValidated(t *testing.T) {
	dir := t.TempDir()
	for _, args := range [][]string{
		{"bench", "fifo", "-d", "0"},
		{"bench", "fifo", "-d", "-1s"},
		{"bench", "rpc", "-d", "1ns"},
		{"conformance", "-timeout=-1s"},
		{"conformance", "-timeout", "0"},
		{"conformance", "-target", "runtime", "-timeout", "1m"}, // the runtime target has no timeout
		{"conformance", "-max-states", "0"},
		{"conformance", "-max-memory", "0"},
		{"conformance", "-mode", "pct", "-walks", "-3"},
		{"conformance", "-workers", "-1"},
		{"conformance", "-target", "runtime", "-runs", "0"},
		{"soak", "-d", "0"},
		{"soak", "-n", "2"},
		{"soak", "-rounds", "-1"},
		{"soak", "-round", "0"},
		{"soak", "-clients", "0"},
		{"soak", "-deadline", "-1s"},
		{"soak", "-from", "0"},
	} {
		code, out, errs := run(t, dir, args...)
		if code != ExitUsage || out != "" || !strings.HasPrefix(errs, "rrefgen "+args[0]+": ") {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want a usage error and nothing run", args, code, out, errs)
		}
	}
}

// soak's usage error printed 45 lines (the error, then its whole help),
// others one: every command's usage error is one line, prefixed with the
// command, and a hint to its -h.
func TestUsageErrorsAreOneLineWithAHint(t *testing.T) {
	dir := t.TempDir()
	cases := [][]string{{"bench"}, {"bench", "nosuch"}, {"bench", "fifo", "-format", "xml"}, {"soak", "-n", "9"}, {"soak", "extra"},
		{"conformance", "-mode", "bogus"}, {"graph", "-format", "png"}, {"version", "extra"}}
	for _, c := range commands {
		cases = append(cases, []string{c.name, "-nosuchflag"})
	}
	for _, args := range cases {
		code, _, errs := run(t, dir, args...)
		lines := strings.Split(strings.TrimSuffix(errs, "\n"), "\n")
		if code != ExitUsage || len(lines) != 2 || !strings.HasPrefix(lines[0], "rrefgen "+args[0]+": ") ||
			!strings.Contains(lines[1], "rrefgen "+args[0]+" -h") {
			t.Errorf("%v: exit %d, %d lines on stderr, want 2 (the error, a hint to -h):\n%s", args, code, len(lines), errs)
		}
	}
	code, _, errs := run(t, dir, "conformence")
	if lines := strings.Split(strings.TrimSuffix(errs, "\n"), "\n"); code != ExitUsage || len(lines) != 2 || !strings.Contains(errs, "did you mean conformance?") {
		t.Errorf("an unknown command: exit %d, %d lines:\n%s", code, len(lines), errs)
	}
}

// There was no version command. rrefgen version prints the module
// version and, when the binary records one, the revision it was built from.
func TestVersion(t *testing.T) {
	code, out, errs := run(t, "", "version")
	if code != ExitOK || !strings.HasPrefix(out, "rrefgen "+ModulePath+" ") || !strings.Contains(out, "built with go") || errs != "" {
		t.Errorf("version: exit %d, %q %q", code, out, errs)
	}
	bi := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: ModulePath, Version: "v0.3.1"}, Settings: []debug.BuildSetting{
		{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: "207fdf1c"}, {Key: "vcs.time", Value: "2026-12-04T15:56:18Z"}, {Key: "vcs.modified", Value: "true"},
	}}
	want := "rrefgen " + ModulePath + " v0.3.1, git revision 207fdf1c of 2026-12-04T15:56:18Z, modified, built with go1.26.8"
	if got := versionLine(bi); got != want {
		t.Errorf("a stamped build:\n got %s\nwant %s", got, want)
	}
	bi.Settings = nil
	if got := versionLine(bi); !strings.Contains(got, "no revision recorded") {
		t.Errorf("a build with no revision: %s", got)
	}
}
