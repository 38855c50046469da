// Package apicheck holds the test that keeps the public surface deliberate:
// every exported identifier of the public packages is listed in
// testdata/api.txt, and a change to the surface must change that file too
// (go test ./internal/apicheck -update writes it), so it shows in review.
package apicheck

import (
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite testdata/api.txt from the packages")

// public are the packages users import, relative to the module root.
var public = []string{
	"conformance", "explore", "fifo", "gen", "genrt", "generated/rref", "generated/group",
	"protocol", "protocol/node", "protocol/world", "runtime/core", "runtime/etcdgroup", "runtime/observe", "runtime/worker", "spec",
}

func TestPublicSurface(t *testing.T) {
	var got []string
	for _, dir := range public {
		got = append(got, surface(t, dir)...)
	}
	golden := filepath.Join("testdata", "api.txt")
	if *update {
		if err := os.WriteFile(golden, []byte(strings.Join(got, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	b, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the public surface changed (-recorded +now); if deliberate, run go test ./internal/apicheck -update:\n%s", diff)
	}
}

// surface lists dir's exported identifiers, one a line: "pkg func F",
// "pkg type T", "pkg method T.M", "pkg field T.F", "pkg var V", "pkg const C".
func surface(t *testing.T, dir string) []string {
	t.Helper()
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, filepath.Join("..", "..", dir), func(fi os.FileInfo) bool {
		return !strings.HasSuffix(fi.Name(), "_test.go")
	}, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	add := func(kind, name string) { out = append(out, fmt.Sprintf("%s %s %s", dir, kind, name)) }
	for _, pkg := range pkgs {
		for _, f := range pkg.Files {
			for _, d := range f.Decls {
				switch d := d.(type) {
				case *ast.FuncDecl:
					if !d.Name.IsExported() {
						continue
					}
					if d.Recv == nil {
						add("func", d.Name.Name)
					} else if recv := receiverName(d.Recv.List[0].Type); ast.IsExported(recv) {
						add("method", recv+"."+d.Name.Name)
					}
				case *ast.GenDecl:
					for _, s := range d.Specs {
						switch s := s.(type) {
						case *ast.TypeSpec:
							if !s.Name.IsExported() {
								continue
							}
							add("type", s.Name.Name)
							if st, ok := s.Type.(*ast.StructType); ok {
								for _, fld := range st.Fields.List {
									for _, n := range fld.Names {
										if n.IsExported() {
											add("field", s.Name.Name+"."+n.Name)
										}
									}
								}
							}
						case *ast.ValueSpec:
							for _, n := range s.Names {
								if n.IsExported() {
									add(strings.ToLower(d.Tok.String()), n.Name)
								}
							}
						}
					}
				}
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func receiverName(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.StarExpr:
		return receiverName(e.X)
	case *ast.IndexExpr:
		return receiverName(e.X)
	case *ast.IndexListExpr:
		return receiverName(e.X)
	case *ast.Ident:
		return e.Name
	}
	return ""
}
