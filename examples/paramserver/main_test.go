package main

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
)

// Two trainers update asynchronously from snapshots that may be stale, so
// how far the loss falls in 40 updates depends on the interleaving: the
// test asks for a fall of over three orders of magnitude, not an exact one.
func TestLocalTraining(t *testing.T) {
	var out bytes.Buffer
	if err := runLocal(&out, 2, 20); err != nil {
		t.Fatal(err)
	}
	var before, after float64
	var updates int
	for _, line := range strings.Split(out.String(), "\n") {
		fmt.Sscanf(line, "loss before: %g", &before)
		fmt.Sscanf(line, "loss after %d updates: %g", &updates, &after)
	}
	if updates != 40 || before == 0 || after > before/1000 || !strings.Contains(out.String(), "no parameter snapshot leaked") {
		t.Fatalf("training did not converge or leaked:\n%s", out.String())
	}
}
