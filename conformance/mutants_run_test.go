//go:build !rrefmutants

package conformance

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// mutantTests are the tests built only with the seeded bugs compiled into
// the core (mutants_test.go), and minMutantsCaught the fewest bugs that
// TestMutants names as caught: today's count, so that a mutant dropped from
// the core by mistake shows.
const (
	mutantTests      = "TestMutants|TestEnumerationCatchesMutants|TestMutantsStepsCommute"
	minMutantsCaught = 22
)

// mutantRunMargin is kept free of the test's own deadline, for the child's
// output to come back when it overruns.
const mutantRunMargin = 10 * time.Second

// TestMutantsCaught runs the mutant tests in a go test of their own, built
// with -tags rrefmutants, so that `go test ./...` alone runs every test of
// the project and a failure elsewhere never hides whether the corpus still
// catches every seeded bug. The core's mutant switch costs a branch on its
// hot paths, so it is compiled only into that build, never into this one.
func TestMutantsCaught(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the core with its seeded bugs")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool on PATH to build the mutants with")
	}
	ctx := context.Background()
	if d, ok := t.Deadline(); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, d.Add(-mutantRunMargin))
		defer cancel()
	}
	out, err := exec.CommandContext(ctx, goBin, "test", "-tags", "rrefmutants", "-run", mutantTests, "-v", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go test -tags rrefmutants: %v\n%s", err, out)
	}
	text := string(out)
	for _, name := range strings.Split(mutantTests, "|") {
		if !strings.Contains(text, "--- PASS: "+name+" ") {
			t.Errorf("%s did not run and pass:\n%s", name, text)
		}
	}
	caught := 0
	for _, line := range strings.Split(text, "\n") {
		if strings.Contains(line, "mutant ") && strings.Contains(line, " caught by ") && !strings.Contains(line, "enumerated program") {
			caught++
		}
	}
	if caught < minMutantsCaught {
		t.Errorf("TestMutants named %d mutants caught, want at least %d:\n%s", caught, minMutantsCaught, text)
	}
	t.Logf("%d seeded bugs caught by the corpus (go test -tags rrefmutants -run Mutants -v ./conformance lists them)", caught)
}
