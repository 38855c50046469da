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
