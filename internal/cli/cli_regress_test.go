package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Bug: parseFlags takes "--" for the end of the flags whenever the last
// argument fs.Parse consumed was "--", even when it was a flag's value
// (-initialisms --). The flags after the next positional argument are then
// taken for spec files, though the same flags with -initialisms=-- work.
func TestFlagValueDashDash(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "a.rspec"), []byte("protocol a;\nversion 1;\nmessage A = 1 { }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errs := run(t, dir, "check", "-initialisms=--", "a.rspec", "-initialisms", "vm")
	if code != ExitOK {
		t.Fatalf("-initialisms=--: exit %d: %s", code, errs)
	}
	code, _, errs = run(t, dir, "check", "-initialisms", "--", "a.rspec", "-initialisms", "vm")
	if code != ExitOK || strings.Contains(errs, "open -initialisms") {
		t.Errorf("-initialisms --: exit %d, a flag taken for a file: %s", code, errs)
	}
}

// TestConformanceRefusesWhatWouldNotRun: a folder with no scenario, a
// count below one, and a flag the chosen run would ignore are usage errors,
// not a pass (each printed "0 scenarios ... 0 failed" or "ok" and exited 0).
func TestConformanceRefusesWhatWouldNotRun(t *testing.T) {
	dir := t.TempDir()
	os.Mkdir(filepath.Join(dir, "empty"), 0o755)
	if code, _, errs := run(t, dir, "conformance", "empty"); code == ExitOK || !strings.Contains(errs, "no scenario") {
		t.Errorf("an empty folder: %d %q", code, errs)
	}
	for _, args := range [][]string{
		{"-target", "runtime", "-runs", "-1"},
		{"-target", "runtime", "-runs", "0"},
		{"-mode", "random", "-walks", "0"},
		{"-workers", "0"},
		{"-transport", "shm"},
		{"-runs", "5"},
		{"-walks", "5"},
	} {
		if code, _, errs := run(t, dir, append([]string{"conformance"}, args...)...); code != ExitUsage || errs == "" {
			t.Errorf("conformance %v: exit %d, %q", args, code, errs)
		}
	}
}

// TestNewcomersMistakes: a misspelled command is answered with the nearest
// one, a bad bench target is named, a missing spec names its command, and
// gen -check says when all is well.
func TestNewcomersMistakes(t *testing.T) {
	if _, _, errs := run(t, "", "conformence"); !strings.Contains(errs, `unknown command "conformence" (did you mean conformance?)`) {
		t.Errorf("a typo: %q", errs)
	}
	if _, _, errs := run(t, "", "xyzzy"); strings.Contains(errs, "did you mean") {
		t.Errorf("nothing near: %q", errs)
	}
	if code, _, errs := run(t, "", "bench", "nosuch"); code != ExitUsage || !strings.Contains(errs, `"nosuch"`) {
		t.Errorf("bench nosuch: %d %q", code, errs)
	}
	if code, _, errs := run(t, t.TempDir(), "check", "nosuch.rspec"); code != ExitFail || !strings.HasPrefix(errs, "rrefgen check: ") {
		t.Errorf("check of a missing file: %d %q", code, errs)
	}
}

// TestRuntimeTargetRefusesSearchFlags: flags of the search mean nothing to
// the runtime target, and -json nothing to -enumerate; a user who set one
// believes it took effect (newcomer trial: -walks 5 ran the default 20).
func TestRuntimeTargetRefusesSearchFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-target", "runtime", "-walks", "5"},
		{"-target", "runtime", "-json"},
		{"-target", "runtime", "-enumerate", "2x2"},
		{"-target", "runtime", "-mode", "pct"},
		{"-enumerate", "2x2", "-json"},
	} {
		if code, _, errs := run(t, "", append([]string{"conformance"}, args...)...); code != ExitUsage || !strings.Contains(errs, "does not apply") {
			t.Errorf("%v: %d %q", args, code, errs)
		}
	}
}
