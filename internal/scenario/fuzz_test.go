package scenario

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzParse: any input is parsed or refused with an error, never a panic;
// a parsed scenario names only declared workers, and its program runs to
// the end against a target that holds everything.
func FuzzParse(f *testing.F) {
	paths, _ := filepath.Glob(filepath.Join("..", "..", "conformance", "testdata", "*.rref"))
	if len(paths) == 0 {
		f.Fatal("no seed scenarios")
	}
	for _, p := range paths {
		src, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(src)
	}
	f.Add([]byte("workers A\nexpect\n"))
	f.Add([]byte("workers A A\nnew B x 99999999999999999999\n"))
	f.Fuzz(func(t *testing.T, src []byte) {
		sc, err := Parse("fuzz.rref", src)
		if err != nil {
			return
		}
		declared := map[string]bool{}
		for _, w := range sc.Workers {
			declared[w] = true
		}
		for _, c := range sc.Cmds {
			for _, w := range []string{c.W, c.V} {
				if w != "" && !declared[w] {
					t.Fatalf("line %d names undeclared worker %q", c.Line, w)
				}
			}
		}
		p := NewProgram(sc)
		fk := newFake()
		fk.fetched = nil // every fetch reads as not issued
		for !p.Done() {
			c := p.Next()
			if c.X != "" {
				fk.holds[c.W+c.X] = true
			}
			p.Step(fk)
		}
		p.End(fk)
	})
}
