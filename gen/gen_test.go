package gen

import (
	"bytes"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dave/jennifer/jen"
	"github.com/google/go-cmp/cmp"
	"golang.org/x/tools/txtar"

	"github.com/rrefkit/rref/spec"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata")

func loadArchive(t *testing.T, path string) (*txtar.Archive, *spec.Protocol) {
	t.Helper()
	ar, err := txtar.ParseFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(ar.Files) == 0 || ar.Files[0].Name != "spec.rspec" {
		t.Fatalf("%s: first section must be spec.rspec", path)
	}
	p, err := spec.Parse("testdata/spec.rspec", ar.Files[0].Data)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return ar, p
}

// compareGolden checks got against the archive's sections after the spec, or rewrites them.
func compareGolden(t *testing.T, path string, ar *txtar.Archive, got []File) {
	t.Helper()
	if *update {
		ar.Files = ar.Files[:1]
		for _, f := range got {
			ar.Files = append(ar.Files, txtar.File{Name: f.Name, Data: f.Content})
		}
		if err := os.WriteFile(path, txtar.Format(ar), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want := map[string][]byte{}
	for _, f := range ar.Files[1:] {
		want[f.Name] = f.Data
	}
	for _, f := range got {
		w, ok := want[f.Name]
		if !ok {
			t.Errorf("%s: unexpected output %s (run with -update)", path, f.Name)
			continue
		}
		if !bytes.Equal(w, f.Content) {
			t.Errorf("%s: %s differs from golden (run with -update and review the diff; -want +got):\n%s", path, f.Name,
				cmp.Diff(strings.Split(string(w), "\n"), strings.Split(string(f.Content), "\n")))
		}
		delete(want, f.Name)
	}
	for name := range want {
		t.Errorf("%s: golden %s is no longer produced", path, name)
	}
}

func TestWholeSpecGolden(t *testing.T) {
	paths, _ := filepath.Glob(filepath.Join("testdata", "specs", "*.txtar"))
	if len(paths) == 0 {
		t.Fatal("no whole-spec goldens")
	}
	for _, path := range paths {
		t.Run(filepath.Base(path), func(t *testing.T) {
			ar, p := loadArchive(t, path)
			files, err := Generate(p, "example.com/out/"+p.Name)
			if err != nil {
				t.Fatal(err)
			}
			again, _ := Generate(p, "example.com/out/"+p.Name)
			for i := range files {
				if !bytes.Equal(files[i].Content, again[i].Content) {
					t.Fatalf("%s: output differs between two runs", files[i].Name)
				}
			}
			compareGolden(t, path, ar, files)
		})
	}
}

// emitters runs one emitter over every declaration of its kind in p.
var emitters = map[string]func(f *jen.File, p *spec.Protocol){
	"named": func(f *jen.File, p *spec.Protocol) {
		for _, n := range p.Named {
			genNamed(f, n)
		}
	},
	"enum": func(f *jen.File, p *spec.Protocol) {
		for _, e := range p.Enums {
			genEnum(f, e)
		}
	},
	"struct": func(f *jen.File, p *spec.Protocol) {
		for _, s := range p.Structs {
			genStruct(f, s)
		}
	},
	"message": func(f *jen.File, p *spec.Protocol) {
		genMessageInterface(f, p)
		for _, m := range p.Messages {
			genMessage(f, m)
		}
	},
	"layout": func(f *jen.File, p *spec.Protocol) {
		for _, l := range p.Layouts {
			genLayout(f, l)
		}
	},
	"frame":      genFrame,
	"invariants": genInvariants,
	"machine": func(f *jen.File, p *spec.Protocol) {
		for _, m := range p.Machines {
			genMachine(f, m)
		}
	},
}

func TestEmitterGolden(t *testing.T) {
	for name, emit := range emitters {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join("testdata", "emitters", name+".txtar")
			ar, p := loadArchive(t, path)
			f := newFile(p, "example.com/out/"+p.Name)
			emit(f, p)
			var buf bytes.Buffer
			if err := f.Render(&buf); err != nil {
				t.Fatal(err)
			}
			compareGolden(t, path, ar, []File{{Name: "out.go", Content: buf.Bytes()}})
		})
	}
}

// TestGoldenOutputCompiles builds each whole-spec golden inside this module and
// runs a round trip over it, so the goldens are real Go, not just text.
func TestGoldenOutputCompiles(t *testing.T) {
	if testing.Short() {
		t.Skip("builds Go packages")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool on PATH")
	}
	paths, _ := filepath.Glob(filepath.Join("testdata", "specs", "*.txtar"))
	for _, path := range paths {
		ar, p := loadArchive(t, path)
		dir, err := os.MkdirTemp("testdata", "compile-")
		if err != nil {
			t.Fatal(err)
		}
		defer os.RemoveAll(dir)
		for _, f := range ar.Files[1:] {
			if !strings.HasSuffix(f.Name, ".go") {
				continue
			}
			if err := os.WriteFile(filepath.Join(dir, f.Name), f.Data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if test, ok := compileTests[p.Name]; ok {
			if err := os.WriteFile(filepath.Join(dir, "roundtrip_test.go"), []byte(test), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		cmd := exec.Command(goBin, "test", "-count=1", "./"+filepath.ToSlash(dir))
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Errorf("%s: generated code does not build or pass:\n%s", path, out)
		}
		t.Logf("%s: %s", path, bytes.TrimSpace(out))
	}
}

var compileTests = map[string]string{
	"tree": `package tree

import (
	"errors"
	"reflect"
	"testing"

	"github.com/rrefkit/rref/genrt"
)

func chain(depth int) Node {
	n := Node{Val: uint32(depth)}
	if depth > 0 {
		n.Kids = []Node{chain(depth - 1)}
	}
	return n
}

func TestTreeRoundTrip(t *testing.T) {
	m := &Tree{Root: Node{Val: 1, Kids: []Node{{Val: 2}, {Val: 3, Kids: []Node{{Val: 4}}}}},
		Forest: Forest{Trees: []Grove{{Name: "a", Inner: Forest{Trees: []Grove{{Name: "b"}}}}}}}
	got, err := Decode(AppendFrame(nil, m), nil)
	if err != nil || !reflect.DeepEqual(got, m) {
		t.Fatalf("round trip: %+v %v", got, err)
	}
}

// A tree nested past the limit is refused, not decoded on an ever deeper
// stack; the limit is the caller's to set.
func TestTreeDepthLimit(t *testing.T) {
	deep := AppendFrame(nil, &Tree{Root: chain(genrt.DefaultMaxDepth)})
	if _, err := Decode(deep, nil); !errors.Is(err, genrt.ErrTooDeep) {
		t.Fatalf("depth %d: %v", genrt.DefaultMaxDepth, err)
	}
	ok := AppendFrame(nil, &Tree{Root: chain(genrt.DefaultMaxDepth - 1)})
	if _, err := Decode(ok, nil); err != nil {
		t.Fatalf("depth %d: %v", genrt.DefaultMaxDepth-1, err)
	}
	lim := genrt.DefaultLimits
	lim.MaxDepth = 3
	if _, err := Decode(AppendFrame(nil, &Tree{Root: chain(3)}), &lim); !errors.Is(err, genrt.ErrTooDeep) {
		t.Fatalf("depth 3 under MaxDepth 3: %v", err)
	}
	// Mutual recursion counts too: Forest -> Grove -> Forest ...
	f := Forest{}
	for range genrt.DefaultMaxDepth {
		f = Forest{Trees: []Grove{{Inner: f}}}
	}
	if _, err := Decode(AppendFrame(nil, &Tree{Forest: f}), nil); !errors.Is(err, genrt.ErrTooDeep) {
		t.Fatalf("deep forest: %v", err)
	}
	var d Decoder
	if _, err := d.Decode(deep); !errors.Is(err, genrt.ErrTooDeep) {
		t.Fatalf("decoder: %v", err)
	}
}
`,
	"kitchen": `package kitchen

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/rrefkit/rref/genrt"
)

func TestRoundTrip(t *testing.T) {
	m := &Everything{A: 7, B: 65535, C: 1 << 31, D: 1<<64 - 1, E: -1 << 63, F: true, G: "héllo", H: []byte{0, 1, 2},
		Tag: 9, Shape: Shape{Name: "tri", Points: []Point{{1, -2}, {-3, 4}}, Color: ColorGreen},
		Grid: [][]Point{{{1, 1}}, nil, {{2, 2}, {3, 3}}}, Colors: []Color{ColorRed, ColorGreen}, Labels: []Label{"a", ""}}
	b := AppendFrame(nil, m)
	if len(b) != SizeFrame(m) {
		t.Fatalf("SizeFrame %d, encoded %d", SizeFrame(m), len(b))
	}
	got, err := Decode(b, nil)
	if err != nil {
		t.Fatal(err)
	}
	// A nil inner list decodes as nil: lists of length 0 are not allocated.
	if !reflect.DeepEqual(got, m) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", got, m)
	}
	for i := 0; i < len(b); i++ {
		if _, err := Decode(b[:i], nil); err == nil {
			t.Fatalf("prefix of %d bytes decoded", i)
		}
	}
	bad := AppendFrame(nil, &Everything{Colors: []Color{5}})
	if _, err := Decode(bad, nil); !errors.Is(err, genrt.ErrBadEnum) {
		t.Fatalf("undeclared enum: %v", err)
	}
	// A message picks its event: the typed step and the dispatch agree, and
	// a message no event carries is illegal in every state.
	if s, _, err := StepDoorOnBurn(DoorOpen, m); err != nil || s != DoorGone {
		t.Fatalf("typed step: %v %v", s, err)
	}
	if s, _, err := StepDoorOnMessage(DoorClosed, m); err != nil || s != DoorGone {
		t.Fatalf("dispatch: %v %v", s, err)
	}
	if _, _, err := StepDoorOnMessage(DoorClosed, &Empty{}); !errors.Is(err, genrt.ErrIllegalTransition) || !strings.Contains(err.Error(), "Empty") {
		t.Fatalf("a message that is no event: %v", err)
	}
	if _, _, err := StepDoorOnMessage(DoorClosed, nil); !errors.Is(err, genrt.ErrIllegalTransition) {
		t.Fatalf("nil message: %v", err)
	}
	if s, _, err := StepDoor(DoorClosed, DoorOnPull); err != nil || s != DoorClosed {
		t.Fatalf("ignored pull: %v %v", s, err)
	}
	if _, _, err := StepDoor(DoorOpen, DoorOnPush); !errors.Is(err, genrt.ErrIllegalTransition) {
		t.Fatalf("illegal push: %v", err)
	}
}
`,
}

func TestRRefDiagrams(t *testing.T) {
	p, err := spec.RRef()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range p.Machines {
		dot, mm := DOT(m), Mermaid(m)
		for _, s := range m.States {
			if !strings.Contains(dot, `"`+s.Name+`"`) || !strings.Contains(mm, s.Name) {
				t.Errorf("%s: state %s missing from a diagram", m.Name, s.Name)
			}
		}
		if !strings.Contains(mm, "[*] --> "+m.Start.Name) {
			t.Errorf("%s: mermaid lacks the start arrow", m.Name)
		}
	}
	md := Markdown(p)
	for _, want := range []string{"```mermaid", "| 7 | `ForkRequest`", "**S1**"} {
		if !strings.Contains(md, want) {
			t.Errorf("PROTOCOL.md lacks %q", want)
		}
	}
}
