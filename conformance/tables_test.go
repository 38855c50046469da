package conformance

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// untrackedAllowed are the functions that may read a table without a
// footprint, and why: each runs outside a step's footprint, or inside a
// step that touches everything.
var untrackedAllowed = map[string]string{
	"CheckEnd":      "the end checks run after the last step",
	"crash":         "a crash is Footprint.Everything (world.Crash)",
	"recomputeSum":  "the sums recomputed from scratch, for the tests",
	"checkCounters": "the counters check reads the state a step reached, after its footprint",
}

// TestTablesAreTracked: the world's maps are read and written only
// through the table methods that record the step's footprint. A use of
// the map underneath (raw) outside cow.go, or of untracked outside the
// functions allowed above, would let a forgotten footprint make two
// dependent steps look independent, and the sleep sets skip a state's
// only failing order.
func TestTablesAreTracked(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	checked := 0
	users := map[string]bool{}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				sel, ok := n.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				switch sel.Sel.Name {
				case "raw":
					if name != "cow.go" {
						t.Errorf("%s: %s reads a table's map directly (raw); use the table's methods", fset.Position(sel.Pos()), fn.Name.Name)
					}
				case "untracked":
					checked++
					users[fn.Name.Name] = true
					if _, ok := untrackedAllowed[fn.Name.Name]; !ok {
						t.Errorf("%s: %s reads a table without a footprint (untracked); use get, lookup or all, or say in untrackedAllowed why it needs none", fset.Position(sel.Pos()), fn.Name.Name)
					}
				}
				return true
			})
		}
	}
	if checked == 0 {
		t.Fatal("no use of untracked found: the check looks at nothing")
	}
	for fn := range untrackedAllowed {
		if !users[fn] {
			t.Errorf("untrackedAllowed names %s, which reads no table untracked: drop it", fn)
		}
	}
}
