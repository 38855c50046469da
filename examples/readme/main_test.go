package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestReadmeProgram: the README shows this program's body, and it prints 6.
func TestReadmeProgram(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	src, _ := os.ReadFile("main.go")
	block := regexp.MustCompile("(?s)## Using the runtime\n\n```go\n(.*?)```").FindSubmatch(readme)
	if block == nil {
		t.Fatal("no Go block under \"Using the runtime\"")
	}
	for _, line := range strings.Split(strings.TrimSpace(string(block[1])), "\n") {
		if !bytes.Contains(src, []byte(strings.TrimSpace(line))) {
			t.Errorf("README line not in main.go: %q", line)
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
