package gen_test

// Adversarial review: specs that `rrefgen check` accepts (spec.Parse
// succeeds) but whose generated Go does not build, vet or pass its own
// generated tests, or that gen cannot write at all.

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rrefkit/rref/gen"
	"github.com/rrefkit/rref/internal/cli"
	"github.com/rrefkit/rref/spec"
)

// attackGenerate parses src (it must be accepted, as by rrefgen check) and
// generates it for a package under gen/testdata/attack-NAME.
func attackGenerate(t *testing.T, name, src string) (string, []gen.File, error) {
	t.Helper()
	p, err := spec.Parse(name+".rspec", []byte(src))
	if err != nil {
		t.Skipf("check refuses the spec (no bug): %v", err)
	}
	dir := filepath.Join("testdata", "attack-"+name)
	files, err := gen.Generate(p, "github.com/rrefkit/rref/gen/testdata/attack-"+name)
	return dir, files, err
}

// attackBuild generates src like rrefgen gen and runs go vet and go test
// on the package; it fails the test on anything check should have refused.
func attackBuild(t *testing.T, name, src string, extra map[string]string) {
	t.Helper()
	dir, files, err := attackGenerate(t, name, src)
	if err != nil {
		t.Fatalf("check accepts the spec, gen fails: %v", err)
	}
	os.RemoveAll(dir)
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := cli.Write(dir, files); err != nil {
		t.Fatalf("check accepts the spec, gen cannot write it: %v", err)
	}
	for n, body := range extra {
		if err := os.WriteFile(filepath.Join(dir, n), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	pkg := "./" + filepath.ToSlash(dir)
	if out, err := exec.Command("go", "vet", pkg).CombinedOutput(); err != nil {
		t.Errorf("check accepts the spec, go vet fails:\n%s", out)
		return
	}
	if out, err := exec.Command("go", "test", "-count=1", pkg).CombinedOutput(); err != nil {
		t.Errorf("check accepts the spec, its generated tests fail:\n%s", out)
	}
}

// Bug: "protocol _;" passes check (gotoken.IsIdentifier("_") is true and
// "_" is lower case) but "package _" is not Go.
func TestBlankProtocolName(t *testing.T) {
	attackBuild(t, "blankpkg", "protocol _;\nversion 1;\nmessage A = 1 { x: u8; }\n", nil)
}

// Bug: a u64 enum may hold values up to 2^64-1 (check allows them), but gen
// writes each constant as Lit(int(v.Value)): 0xffffffffffffffff becomes -1.
func TestU64EnumAboveMaxInt64(t *testing.T) {
	attackBuild(t, "u64enum", `protocol u64enum;
version 1;
enum Big: u64 { small = 0; huge = 0xffffffffffffffff; }
message A = 1 { b: Big; }
`, nil)
}

// Bug: U+FEFF is neither invalid UTF-8 nor a control character, so check
// lets it into doc comments and invariant texts; Go refuses a byte order
// mark anywhere but at the start of a file, so gen fails to format.
func TestBOMInDocComment(t *testing.T) {
	for name, src := range map[string]string{
		"bomdoc": "protocol bomdoc;\nversion 1;\n/// a \ufeff b\nmessage A = 1 { x: u8; }\n",
		"bominv": "protocol bominv;\nversion 1;\ninvariant Safe \"a \ufeff b\";\n",
	} {
		t.Run(name, func(t *testing.T) {
			if _, _, err := attackGenerate(t, name, src); err != nil {
				t.Errorf("check accepts the spec, gen fails: %.200v", err)
			}
		})
	}
}

// Bug: a doc comment line "+build ignore" (or an invariant text with one
// after \n) becomes the line comment "// +build ignore", which gofmt
// (go/format, run by jen) hoists to the top of the file as a build
// constraint: the file silently leaves the package.
func TestPlusBuildInDocComment(t *testing.T) {
	t.Run("message doc", func(t *testing.T) {
		_, files, err := attackGenerate(t, "plusbuild", "protocol plusbuild;\nversion 1;\n/// +build ignore\nmessage A = 1 { x: u8; }\n")
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			if strings.HasSuffix(f.Name, ".go") && strings.Contains(string(f.Content), "//go:build") {
				t.Errorf("%s got a build constraint from a doc comment:\n%.300s", f.Name, f.Content)
			}
		}
	})
	t.Run("invariant text", func(t *testing.T) {
		attackBuild(t, "plusbuildinv", `protocol plusbuildinv;
version 1;
message A = 1 { x: u8; }
machine M { start state s; final state f; event go(A); on go: s -> f; }
invariant Safe "nothing bad\n+build ignore";
`, nil)
	})
}

// Bug: the sample of a recursive struct nested two structs deep is its
// zero value (gen/tests.go sample, depth >= sampleDepth), whose enum field
// is 0, a value the enum does not declare: the generated round trip fails.
func TestRecursiveStructZeroSample(t *testing.T) {
	attackBuild(t, "zerosample", `protocol zerosample;
version 1;
enum Color: u8 { red = 1; }
struct C { e: Color; cs: []C; }
struct B { c: C; }
struct A { b: B; }
message M = 1 { a: A; }
`, nil)
}

// Bug: machines AB and Ab have distinct Go names (check accepts them) but
// gen names both diagrams diagrams/ab.dot and ab.mmd: one is lost, and
// rrefgen gen -check reports the output stale right after rrefgen gen.
func TestDiagramFilesCollide(t *testing.T) {
	dir, files, err := attackGenerate(t, "twodiag", `protocol twodiag;
version 1;
machine AB { start state s; final state f; event go; on go: s -> f; }
machine Ab { start state s; final state f; event stop; on stop: s -> f; }
`)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, f := range files {
		if seen[f.Name] {
			t.Errorf("gen writes %s twice", f.Name)
		}
		seen[f.Name] = true
	}
	os.RemoveAll(dir)
	defer os.RemoveAll(dir)
	if err := cli.Write(dir, files); err != nil {
		t.Fatal(err)
	}
	if diffs, err := cli.Stale(dir, files); err != nil || len(diffs) > 0 {
		t.Errorf("just written, yet stale: %v %.300q", err, diffs)
	}
}

// Bug: an identifier has no length limit in the spec or in Go, but gen
// names each machine's diagram file after it: a 300-letter machine name
// makes a 304-byte file name, which gen cannot write.
func TestLongMachineName(t *testing.T) {
	long := strings.Repeat("M", 300)
	attackBuild(t, "longname", "protocol longname;\nversion 1;\nmachine "+long+" { start state s; final state f; event go; on go: s -> f; }\n", nil)
}

// Bug: a list of field-less structs is bounded by MaxList alone
// (genrt.ConsumeEmptyCount), per list: in a list of such lists every
// 3-byte inner count makes the decoder loop 65536 times, so a 30 KB frame
// costs ~650 million iterations and a frame at DefaultLimits.MaxFrame
// (64 MiB) tens of minutes of CPU.
func TestEmptyStructListAmplification(t *testing.T) {
	attackBuild(t, "amplify", `protocol amplify;
version 1;
struct E { }
message M = 1 { l: [][]E; }
`, map[string]string{"amplify_attack_test.go": `package amplify

import (
	"testing"
	"time"

	"github.com/rrefkit/rref/genrt"
)

func TestSmallFrameDecodesQuickly(t *testing.T) {
	const lists = 10000
	frame := []byte{FrameVersion, byte(CodeM)}
	frame = genrt.AppendUvarint(frame, lists)
	for range lists {
		frame = genrt.AppendUvarint(frame, uint64(genrt.DefaultLimits.MaxList))
	}
	start := time.Now()
	if _, err := Decode(frame, nil); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 100*time.Millisecond {
		t.Errorf("a %d-byte frame took %v to decode (%d elements)", len(frame), d, lists*genrt.DefaultLimits.MaxList)
	}
}
`})
}

// Bug: the generated tests' sample of a list holds two samples of its
// element (gen/tests.go sample), so a sample's size doubles with every list
// level, through structs too: struct S { a: [][]...u8 } in a message field
// [][]...S is 4^k elements for k levels each. The 100-byte spec below (k=8)
// makes a 1 MB generated_test.go; each further level quadruples it: k=10
// (109 bytes) took 1.2 GB of memory and 11 s, and k=11 was killed by the
// kernel. Type nesting is bounded at 16 levels, far past that.
func TestSampleGrowsExponentially(t *testing.T) {
	sizes := map[int]int{}
	for _, k := range []int{6, 7, 8} {
		l := strings.Repeat("[]", k)
		src := "protocol x;\nversion 1;\nstruct S { a: " + l + "u8; }\nmessage M = 1 { s: " + l + "S; }\n"
		p, err := spec.Parse("x.rspec", []byte(src))
		if err != nil {
			t.Fatal(err)
		}
		files, err := gen.Generate(p, "example.com/x")
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			if f.Name == gen.TestFile {
				sizes[k] = len(f.Content)
				t.Logf("k=%d: a %d-byte spec, a %d-byte %s", k, len(src), len(f.Content), gen.TestFile)
			}
		}
	}
	if sizes[8] > 1<<20 || sizes[8] > 3*sizes[7] {
		t.Errorf("generated tests grow 4x per list level: %d, %d, %d bytes for k=6,7,8 (k=11: ~%d MB of source, several GB of memory to render)",
			sizes[6], sizes[7], sizes[8], sizes[8]*64>>20)
	}
}

// Bug: "protocol init;" passed check and generated a package that builds
// and passes its own tests, but no one can import it ("cannot import
// package as init"); "documentation" made a package the go command skips,
// and "wire_test" one whose generated tests it read as a second package.
// Check refuses those; the names that look as risky but that Go allows
// (an import may shadow a predeclared name or another import's name)
// generate packages another package imports under the protocol's name.
func TestProtocolNamesImport(t *testing.T) {
	if testing.Short() {
		t.Skip("builds Go packages")
	}
	refused := []string{"init", "documentation", "wire_test"}
	accepted := []string{"fmt", "genrt", "testing", "unsafe", "nil", "iota", "string"}
	for _, name := range refused {
		if _, err := spec.Parse("n.rspec", []byte("protocol "+name+";\nversion 1;\n")); err == nil || !strings.HasPrefix(err.Error(), "n.rspec:1:10: ") {
			t.Errorf("protocol %s: check gives %v, want a refusal at n.rspec:1:10", name, err)
		}
	}
	root := filepath.Join("testdata", "importnames")
	os.RemoveAll(root)
	t.Cleanup(func() { os.RemoveAll(root) })
	const module = "github.com/rrefkit/rref/gen/testdata/importnames/"
	user := "package user\n\nimport (\n"
	uses := ""
	for _, name := range accepted {
		p, err := spec.Parse(name+".rspec", []byte("protocol "+name+";\nversion 1;\nmessage A = 1 { x: u8; }\n"))
		if err != nil {
			t.Fatalf("protocol %s: %v", name, err)
		}
		files, err := gen.Generate(p, module+"p"+name)
		if err != nil {
			t.Fatal(err)
		}
		if err := cli.Write(filepath.Join(root, "p"+name), files); err != nil {
			t.Fatal(err)
		}
		user += "\t\"" + module + "p" + name + "\"\n"
		uses += "var _ " + name + ".A\n"
	}
	user += ")\n\n" + uses
	if err := os.MkdirAll(filepath.Join(root, "user"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "user", "user.go"), []byte(user), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("go", "vet", "./"+filepath.ToSlash(root)+"/...").CombinedOutput(); err != nil {
		t.Fatalf("go vet: %s", out)
	}
}
