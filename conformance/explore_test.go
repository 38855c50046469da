package conformance

import (
	"os"
	"path/filepath"
	"testing"
)

func TestQuick(t *testing.T) {
	paths, _ := filepath.Glob("testdata/*.rref")
	for _, p := range paths {
		src, _ := os.ReadFile(p)
		sc, err := Parse(p, src)
		if err != nil {
			t.Fatal(err)
		}
		r := Explore(sc, Options{})
		t.Logf("%s: %v schedules, %d states, %v, %v", p, r.Schedules, r.States, r.Duration, r.Violation)
		for _, l := range r.Trace {
			t.Log("  ", l)
		}
	}
}
