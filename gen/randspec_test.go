package gen_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/rrefkit/rref/gen"
	"github.com/rrefkit/rref/internal/cli"
	"github.com/rrefkit/rref/spec"
)

// randomSpec draws the source of a spec from the whole language: named
// scalars, enums of every base, structs nesting structs and lists of
// anything (u8, bool and enums included), messages (maybe none), machines
// with many states or few, invariants with escapes, doc comments with
// non-ASCII text, and names in snake_case, CamelCase and with initialisms.
// Most drawn specs are valid; the property only holds for those check
// accepts, and the test counts how many that is.
func randomSpec(t *rapid.T) string {
	var b strings.Builder
	used := map[string]bool{}
	ident := func(label string) string {
		for {
			parts := rapid.SliceOfN(rapid.SampledFrom([]string{"id", "rref", "x", "call", "vm", "io", "Frame", "name", "Name",
				"a", "b", "k", "size", "code", "tcp", "list", "state", "go", "map", "type", "the", "Zed", "q9"}), 1, 3).Draw(t, label)
			n := strings.Join(parts, "_")
			if rapid.Bool().Draw(t, label+"_camel") {
				n = strings.ReplaceAll(strings.Title(strings.ReplaceAll(n, "_", " ")), " ", "") //nolint:staticcheck // ASCII only
			}
			if !used[strings.ToLower(n)] {
				used[strings.ToLower(n)] = true
				return n
			}
		}
	}
	doc := func(label string) {
		if rapid.IntRange(0, 3).Draw(t, label) == 0 {
			fmt.Fprintf(&b, "/// %s — größer, */ %%d `x` \\\n", label)
		}
	}
	fmt.Fprintf(&b, "protocol %s;\nversion %d;\n", rapid.SampledFrom([]string{"p", "lockpb", "x1", "gen"}).Draw(t, "pkg"), rapid.IntRange(1, 255).Draw(t, "version"))
	scalars := []string{"u8", "u16", "u32", "u64", "i64", "fixed64", "bool", "string", "bytes"}
	var types []string // every type name a field may use
	types = append(types, scalars...)
	types = append(types, "node") // a field's type, not a named type's base
	for i := range rapid.IntRange(0, 2).Draw(t, "named") {
		n := ident(fmt.Sprintf("named%d", i))
		doc("named doc")
		fmt.Fprintf(&b, "type %s = %s;\n", n, rapid.SampledFrom(scalars).Draw(t, "named base"))
		types = append(types, n)
	}
	for i := range rapid.IntRange(0, 2).Draw(t, "enums") {
		n := ident(fmt.Sprintf("enum%d", i))
		fmt.Fprintf(&b, "enum %s: %s {\n", n, rapid.SampledFrom([]string{"u8", "u16", "u32", "u64"}).Draw(t, "enum base"))
		for j := range rapid.IntRange(1, 4).Draw(t, "values") {
			fmt.Fprintf(&b, "    %s = %d;\n", ident("value"), j*rapid.IntRange(1, 60).Draw(t, "step"))
		}
		b.WriteString("}\n")
		types = append(types, n)
	}
	typ := func(label string) string {
		ty := rapid.SampledFrom(types).Draw(t, label)
		for range rapid.IntRange(0, 2).Draw(t, label+" lists") {
			ty = "[]" + ty
		}
		return ty
	}
	fields := func(label string) {
		for range rapid.IntRange(0, 5).Draw(t, label) {
			doc("field doc")
			fmt.Fprintf(&b, "    %s: %s;\n", ident("field"), typ("field type"))
		}
	}
	for i := range rapid.IntRange(0, 3).Draw(t, "structs") {
		n := ident(fmt.Sprintf("struct%d", i))
		doc("struct doc")
		fmt.Fprintf(&b, "struct %s {\n", n)
		fields("struct fields")
		if rapid.IntRange(0, 3).Draw(t, "recursive") == 0 {
			fmt.Fprintf(&b, "    %s: []%s;\n", ident("self"), n) // a tree
		}
		b.WriteString("}\n")
		types = append(types, n) // later structs may contain it
	}
	for i := range rapid.IntRange(0, 2).Draw(t, "layouts") {
		doc("layout doc")
		fmt.Fprintf(&b, "layout %s {\n", ident(fmt.Sprintf("layout%d", i)))
		for range rapid.IntRange(1, 5).Draw(t, "layout fields") {
			doc("layout field doc")
			ty := rapid.SampledFrom([]string{"u8", "bool", "fixed16", "fixed32", "fixed64", "[1]u8", "[16]u8", "[3]fixed32", "[1]fixed64"}).Draw(t, "layout type")
			fmt.Fprintf(&b, "    %s: %s;\n", ident("layout field"), ty)
		}
		b.WriteString("}\n")
	}
	var msgs []string
	for i := range rapid.IntRange(0, 4).Draw(t, "messages") {
		n := ident(fmt.Sprintf("message%d", i))
		doc("message doc")
		fmt.Fprintf(&b, "message %s = %d {\n", n, i+1+rapid.IntRange(0, 3).Draw(t, "code gap")*1000)
		fields("message fields")
		b.WriteString("}\n")
		msgs = append(msgs, n)
	}
	for i := range rapid.IntRange(0, 2).Draw(t, "machines") {
		mn := ident(fmt.Sprintf("machine%d", i))
		states := rapid.SampledFrom([]int{1, 2, 3, 5, 256, 300}).Draw(t, "states")
		events := rapid.IntRange(1, 4).Draw(t, "events")
		fmt.Fprintf(&b, "machine %s {\n", mn)
		// A chain s0 -> s1 -> ... -> final: every state reachable, every
		// state reaching the final one.
		for s := range states {
			prefix := ""
			switch {
			case s == 0 && states == 1:
				prefix = "start final "
			case s == 0:
				prefix = "start "
			case s == states-1:
				prefix = "final "
			case rapid.IntRange(0, 9).Draw(t, "hot") == 0:
				prefix = "hot "
			}
			fmt.Fprintf(&b, "    %sstate s%d_%s;\n", prefix, s, mn)
		}
		var evs []string
		for e := range events {
			en := fmt.Sprintf("e%d_%s", e, mn)
			evs = append(evs, en)
			switch payload := rapid.IntRange(0, 2).Draw(t, "payload"); {
			case payload == 0 && len(msgs) > 0:
				fmt.Fprintf(&b, "    event %s(%s);\n", en, rapid.SampledFrom(msgs).Draw(t, "payload msg"))
			case payload == 1:
				// A typed payload keys a timer, or rides an internal event.
				src := rapid.SampledFrom([]string{"", "timer "}).Draw(t, "payload source")
				fmt.Fprintf(&b, "    %sevent %s(%s);\n", src, en, typ("payload type"))
			default:
				src := rapid.SampledFrom([]string{"", "input ", "timer "}).Draw(t, "source")
				fmt.Fprintf(&b, "    %sevent %s;\n", src, en)
			}
		}
		for s := 0; s+1 < states; s++ {
			fmt.Fprintf(&b, "    on %s: s%d_%s -> s%d_%s;\n", evs[s%len(evs)], s, mn, s+1, mn)
		}
		if states > 1 && len(evs) > 1 && rapid.Bool().Draw(t, "ignore") {
			// The chain's event for s0 is evs[0]: another one is free there.
			fmt.Fprintf(&b, "    ignore %s in s0_%s;\n", evs[1], mn)
		}
		b.WriteString("}\n")
	}
	for range rapid.IntRange(0, 2).Draw(t, "invariants") {
		fmt.Fprintf(&b, "invariant %s \"a\\nb \\\"quoted\\\" */ \\t%%v ü\";\n", ident("invariant"))
	}
	return b.String()
}

// testedPerBatch is how many packages of a batch run their generated tests.
const testedPerBatch = 250

// randomSpecCount is how many random specs a default test run compiles;
// RREFGEN_RANDOM_SPECS raises it for a long run.
const randomSpecCount = 40

// TestRandomSpecsCompile: every random spec that check accepts generates Go
// that builds and passes go vet. The specs are compiled together, as
// packages of one folder, so that thousands stay affordable.
func TestRandomSpecsCompile(t *testing.T) {
	if testing.Short() {
		t.Skip("builds Go packages")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool on PATH")
	}
	n := randomSpecCount
	if s := os.Getenv("RREFGEN_RANDOM_SPECS"); s != "" {
		if n, err = strconv.Atoi(s); err != nil {
			t.Fatal(err)
		}
	}
	from := 0 // RREFGEN_RANDOM_FROM resumes a long run at a spec number
	if s := os.Getenv("RREFGEN_RANDOM_FROM"); s != "" {
		if from, err = strconv.Atoi(s); err != nil {
			t.Fatal(err)
		}
	}
	const batch = 250 // packages per go vet: its cost is mostly per call
	accepted, built := 0, 0
	for first := from; first < n; first += batch {
		dir, err := os.MkdirTemp("testdata", "compile-rand-")
		if err != nil {
			t.Fatal(err)
		}
		srcs := map[string]string{}
		for i := first; i < min(first+batch, n); i++ {
			src := rapid.Custom(randomSpec).Example(i)
			p, err := spec.Parse(fmt.Sprintf("rand%d.rspec", i), []byte(src))
			if err != nil {
				continue
			}
			accepted++
			pkgDir := fmt.Sprintf("r%d", i)
			files, err := gen.Generate(p, "github.com/rrefkit/rref/gen/"+filepath.ToSlash(filepath.Join(dir, pkgDir)))
			if err != nil {
				t.Errorf("spec %d: check accepts it, gen refuses it: %v\n%s", i, err, src)
				continue
			}
			srcs[pkgDir] = src
			if err := cli.Write(filepath.Join(dir, pkgDir), files); err != nil {
				t.Fatal(err)
			}
		}
		out, err := exec.Command(goBin, "vet", "./"+filepath.ToSlash(dir)+"/...").CombinedOutput()
		if err == nil {
			// The generated tests of a few run too: round trips, prefixes,
			// tables, the fuzz seeds. (Vet has type-checked them all.)
			var some []string
			for i := first; i < min(first+batch, n) && len(some) < testedPerBatch; i++ {
				if pkgDir := fmt.Sprintf("r%d", i); srcs[pkgDir] != "" {
					some = append(some, "./"+filepath.ToSlash(filepath.Join(dir, pkgDir)))
				}
			}
			if len(some) > 0 {
				out, err = exec.Command(goBin, append([]string{"test", "-count=1"}, some...)...).CombinedOutput()
			}
		}
		if err != nil {
			// Name the specs whose packages failed, with their source.
			shown := 0
			for pkgDir, src := range srcs {
				if strings.Contains(string(out), "/"+pkgDir+"/") || strings.Contains(string(out), "/"+pkgDir+"\n") {
					if shown < 3 {
						t.Errorf("spec %s: generated code does not build or vet:\n%s\n", pkgDir, src)
					}
					shown++
				}
			}
			t.Errorf("go vet or test: %s", truncate(string(out), 6000))
		} else {
			built += len(srcs)
		}
		os.RemoveAll(dir)
		if n > randomSpecCount {
			t.Logf("specs %d to %d: %d accepted so far, %d built, vetted and tested", first, min(first+batch, n)-1, accepted, built)
		}
	}
	t.Logf("%d random specs, %d accepted by check, %d built and vetted, their generated tests run on %d per batch", n, accepted, built, testedPerBatch)
	if drawn := n - from; accepted < drawn/2 {
		t.Errorf("only %d of %d random specs are valid: the generator no longer draws valid specs", accepted, drawn)
	}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "\n..."
}

// TestEdgeSpecsCompile: the specs check once accepted and gen could not
// turn into compiling Go, each now generating code that builds, vets and
// passes its generated tests: lists of u8, bool and a u8 enum; a protocol
// with no messages; a machine of 300 states; a tree.
func TestEdgeSpecsCompile(t *testing.T) {
	if testing.Short() {
		t.Skip("builds Go packages")
	}
	states := "machine Big {\nevent go;\n"
	for i := range 300 {
		switch i {
		case 0:
			states += "start "
		case 299:
			states += "final "
		}
		states += fmt.Sprintf("state s%d;\n", i)
	}
	for i := range 299 {
		states += fmt.Sprintf("on go: s%d -> s%d;\n", i, i+1)
	}
	states += "}\n"
	specs := map[string]string{
		"lists":    "protocol lists;\nversion 1;\nenum Small: u8 { a = 1; b = 2; }\nmessage L = 1 { bytes1: []u8; flags: []bool; smalls: []Small; grid: [][]u8; }\n",
		"nomsg":    "protocol nomsg;\nversion 1;\nmachine M { start state a; final state b; event go; on go: a -> b; }\n",
		"bigmach":  "protocol bigmach;\nversion 1;\n" + states,
		"recurse":  "protocol recurse;\nversion 1;\nstruct Node { val: u32; kids: []Node; }\nmessage T = 1 { root: Node; }\n",
		"emptyels": "protocol emptyels;\nversion 1;\nstruct E { }\nmessage M = 1 { es: []E; }\n",
		"layouts": "protocol layouts;\nversion 1;\nlayout Only { one: [1]u8; }\n" +
			"layout All { a: u8; b: bool; c: fixed16; d: fixed32; e: fixed64; f: [3]u8; g: bool; h: [2]fixed16; i: [3]fixed32; j: [1]fixed64; }\n",
	}
	dir, err := os.MkdirTemp("testdata", "compile-edge-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	var pkgs []string
	for name, src := range specs {
		p, err := spec.Parse(name+".rspec", []byte(src))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		files, err := gen.Generate(p, "github.com/rrefkit/rref/gen/"+filepath.ToSlash(filepath.Join(dir, name)))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if err := cli.Write(filepath.Join(dir, name), files); err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, "./"+filepath.ToSlash(filepath.Join(dir, name)))
	}
	if out, err := exec.Command("go", append([]string{"vet"}, pkgs...)...).CombinedOutput(); err != nil {
		t.Fatalf("go vet: %s", out)
	}
	if out, err := exec.Command("go", append([]string{"test", "-count=1"}, pkgs...)...).CombinedOutput(); err != nil {
		t.Fatalf("go test: %s", out)
	}
}
