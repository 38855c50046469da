package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestReadmeProgram: the README's "Five minutes with the runtime" shows
// this program's main, line for line (less one tab of indentation), and it
// prints 6.
func TestReadmeProgram(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	src, _ := os.ReadFile("main.go")
	block := regexp.MustCompile("(?s)\n## Five minutes with the runtime\n[^#]*?```go\n(.*?)```").FindSubmatch(readme)
	if block == nil {
		t.Fatal("no Go block under \"Five minutes with the runtime\"")
	}
	body := regexp.MustCompile("(?s)\nfunc main\\(\\) \\{\n(.*?\n)\\}\n").FindSubmatch(src)
	if body == nil {
		t.Fatal("main.go has no func main")
	}
	shown := strings.Split(string(block[1]), "\n")
	lines := strings.Split(string(body[1]), "\n")
	for i, line := range lines {
		lines[i] = strings.TrimPrefix(line, "\t")
	}
	if len(shown) != len(lines) {
		t.Errorf("the README shows %d lines, main has %d", len(shown)-1, len(lines)-1)
	}
	for i := 0; i < len(shown) && i < len(lines); i++ {
		if shown[i] != lines[i] {
			t.Errorf("line %d of the README's program: %q, of main: %q", i+1, shown[i], lines[i])
		}
	}
	if testing.Short() {
		return
	}
	out, err := exec.Command("go", "run", ".").CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "6" {
		t.Fatalf("go run: %v\n%s", err, out)
	}
}
