package conformance

import (
	"fmt"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// genScenario draws a random, well-formed program: every command names a
// handle that exists and is not yet released when the command runs, and
// every handle is released at the end, so a correct core must end clean.
func genScenario(t *rapid.T) string {
	nw := rapid.IntRange(2, 4).Draw(t, "workers")
	names := []string{"A", "B", "C", "D"}[:nw]
	var b strings.Builder
	fmt.Fprintf(&b, "# generated\nworkers %s\n", strings.Join(names, " "))
	type h struct{ w, name string }
	var live []h
	n := 0
	fresh := func() string { n++; return fmt.Sprintf("h%d", n) }
	steps := rapid.IntRange(1, 7).Draw(t, "steps")
	for i := 0; i < steps; i++ {
		op := rapid.IntRange(0, 5).Draw(t, "op")
		if len(live) == 0 {
			op = rapid.IntRange(0, 1).Draw(t, "create")
		}
		w := rapid.SampledFrom(names).Draw(t, "w")
		switch op {
		case 0:
			x := fresh()
			fmt.Fprintf(&b, "new %s %s %d\n", w, x, i)
			live = append(live, h{w, x})
		case 1:
			o, x := rapid.SampledFrom(names).Draw(t, "owner"), fresh()
			if rapid.Bool().Draw(t, "fail") {
				fmt.Fprintf(&b, "remote %s %s %s fail\n", w, o, x)
			} else {
				fmt.Fprintf(&b, "remote %s %s %s %d\n", w, o, x, i)
			}
			live = append(live, h{w, x})
		case 2, 3:
			src := rapid.SampledFrom(live).Draw(t, "src")
			to, y := rapid.SampledFrom(names).Draw(t, "to"), fresh()
			verb := "pass"
			if op == 3 {
				verb = "return"
			}
			fmt.Fprintf(&b, "%s %s %s %s %s\n", verb, src.w, to, src.name, y)
			live = append(live, h{to, y})
		case 4:
			x := rapid.SampledFrom(live).Draw(t, "fetched")
			fmt.Fprintf(&b, "fetch %s %s\n", x.w, x.name)
		case 5:
			j := rapid.IntRange(0, len(live)-1).Draw(t, "released")
			fmt.Fprintf(&b, "release %s %s\n", live[j].w, live[j].name)
			live = append(live[:j], live[j+1:]...)
		}
	}
	for _, x := range live {
		fmt.Fprintf(&b, "release %s %s\n", x.w, x.name)
	}
	b.WriteString("settle\nexpect clean\n")
	return b.String()
}

// TestRandomPrograms checks random programs under random schedules: every
// invariant holds and every run ends clean.
func TestRandomPrograms(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		src := genScenario(t)
		sc, err := Parse("generated.rref", []byte(src))
		if err != nil {
			t.Fatalf("generator wrote a malformed scenario: %v\n%s", err, src)
		}
		seed := rapid.Int64().Draw(t, "seed")
		r := Explore(sc, Options{Mode: Random, Walks: 10, Seed: seed})
		if r.Passed() {
			r = Explore(sc, Options{MaxStates: 3000})
		}
		if !r.Passed() {
			t.Fatalf("%v\n%s\ntrace:\n  %s", r.Violation, src, strings.Join(r.Trace, "\n  "))
		}
	})
}
