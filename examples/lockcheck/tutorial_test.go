package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/rrefkit/rref/internal/cli"
)

// fence matches a fenced block of docs/tutorial.md: its language and body.
var fence = regexp.MustCompile("(?ms)^```(\\w+)\\n(.*?)^```\\n")

// TestTutorialStaysTrue checks docs/tutorial.md against this example: the
// spec it shows is lock.rspec, every Go excerpt is in handlers.go, model.go
// or main.go, the check command prints what it shows, and running the
// example prints the failure it shows, step by step.
func TestTutorialStaysTrue(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "tutorial.md"))
	if err != nil {
		t.Fatal(err)
	}
	spec, _ := os.ReadFile("lock.rspec")
	var code [][]byte
	for _, f := range []string{"handlers.go", "model.go", "main.go"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		code = append(code, b)
	}
	var texts []string
	blocks := fence.FindAllSubmatch(doc, -1)
	if len(blocks) < 8 {
		t.Fatalf("only %d code blocks in the tutorial", len(blocks))
	}
	for _, b := range blocks {
		lang, body := string(b[1]), b[2]
		switch lang {
		case "rspec":
			if !bytes.Equal(body, spec) {
				t.Errorf("the tutorial's spec is not lock.rspec")
			}
		case "go":
			if !slices.ContainsFunc(code, func(f []byte) bool { return bytes.Contains(f, body) }) {
				t.Errorf("this excerpt is in none of handlers.go, model.go and main.go:\n%s", body)
			}
		case "text":
			texts = append(texts, string(body))
		}
	}
	if len(texts) != 2 {
		t.Fatalf("want the check's output and the run's output, found %d text blocks", len(texts))
	}
	var out, errs bytes.Buffer
	root, _ := filepath.Abs(filepath.Join("..", ".."))
	if code := cli.Main(&cli.Env{Stdout: &out, Stderr: &errs, Dir: root}, []string{"check", "examples/lockcheck/lock.rspec"}); code != 0 || out.String() != texts[0] {
		t.Errorf("rrefgen check printed %q (%q), the tutorial shows %q", out.String(), errs.String(), texts[0])
	}
	if testing.Short() {
		return
	}
	// The example exits 0 when each variant gets the verdict it should.
	run, err := exec.Command("go", "run", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go run ./examples/lockcheck: %v\n%s", err, run)
	}
	got := squash(string(run))
	for _, line := range strings.Split(strings.TrimSpace(texts[1]), "\n") {
		if !strings.Contains(got, squash(line)) {
			t.Errorf("go run ./examples/lockcheck does not print %q:\n%s", line, run)
		}
	}
}

// squash makes runs of spaces one, for output laid out in columns.
func squash(s string) string { return strings.Join(strings.Fields(s), " ") }
