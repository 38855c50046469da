package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// fence matches a fenced block of a Markdown file: its language and body.
var fence = regexp.MustCompile("(?ms)^```(\\w+)\\n(.*?)^```\\n")

// TestRuntimeTutorialStaysTrue checks docs/runtime-tutorial.md against this
// example: every Go excerpt is found verbatim in one of its source files,
// and every command that runs the example gives flags it has, in a
// combination it accepts. (The runs the tutorial shows are this package's
// other tests: TestProcesses, TestTrainerKilled, TestServerKilled,
// TestForgottenRelease, TestObserve.)
func TestRuntimeTutorialStaysTrue(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "runtime-tutorial.md"))
	if err != nil {
		t.Fatal(err)
	}
	sources := map[string][]byte{}
	var names []string
	files, _ := filepath.Glob("*.go")
	for _, name := range files {
		if !strings.HasSuffix(name, "_test.go") {
			sources[name], _ = os.ReadFile(name)
			names = append(names, name)
		}
	}
	excerpts, commands := 0, 0
	for _, b := range fence.FindAllSubmatch(doc, -1) {
		switch string(b[1]) {
		case "go":
			excerpts++
			if !inAny(sources, b[2]) {
				t.Errorf("this excerpt is in none of %s:\n%s", strings.Join(names, ", "), b[2])
			}
		case "sh":
			commands += checkCommands(t, string(b[2]))
		}
	}
	if excerpts < 8 || commands < 10 {
		t.Errorf("the tutorial shows %d Go excerpts and %d runs of the example; it lost some", excerpts, commands)
	}
}

func inAny(sources map[string][]byte, excerpt []byte) bool {
	for _, src := range sources {
		if bytes.Contains(src, excerpt) {
			return true
		}
	}
	return false
}

// checkCommands parses the flags of every run of the example in a shell
// block (PEERS=... set earlier in the block, a trailing &) and returns how
// many it found.
func checkCommands(t *testing.T, block string) int {
	t.Helper()
	vars := map[string]string{}
	runs := 0
	for _, line := range strings.Split(block, "\n") {
		words := strings.Fields(line)
		if len(words) == 1 && strings.Contains(words[0], "=") {
			name, value, _ := strings.Cut(words[0], "=")
			vars[name] = value
			continue
		}
		at := -1
		for i, w := range words {
			if strings.HasSuffix(w, "examples/paramserver") {
				at = i
			}
		}
		if at < 0 || (at > 0 && words[at-1] != "run") {
			continue
		}
		runs++
		args := words[at+1:]
		if n := len(args); n > 0 && args[n-1] == "&" {
			args = args[:n-1]
		}
		for i, a := range args {
			if strings.HasPrefix(a, "$") {
				args[i] = vars[a[1:]]
			}
		}
		var o options
		fs := newFlags(&o)
		fs.SetOutput(new(bytes.Buffer))
		if err := fs.Parse(args); err != nil {
			t.Errorf("%q: %v", line, err)
		} else if err := o.check(); err != nil {
			t.Errorf("%q: %v", line, err)
		}
	}
	return runs
}
