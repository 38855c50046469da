package spec

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/tools/txtar"
)

var update = flag.Bool("update", false, "rewrite expected errors in testdata")

// TestInvalidSpecs checks that every malformed spec gets its positioned error.
func TestInvalidSpecs(t *testing.T) {
	path := filepath.Join("testdata", "invalid.txtar")
	ar, err := txtar.ParseFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cases := 0
	for i := 0; i < len(ar.Files); i++ {
		f := &ar.Files[i]
		if !strings.HasSuffix(f.Name, ".rspec") {
			continue
		}
		if i+1 >= len(ar.Files) || ar.Files[i+1].Name != strings.TrimSuffix(f.Name, ".rspec")+".err" {
			t.Fatalf("%s: not followed by its .err section", f.Name)
		}
		want := &ar.Files[i+1]
		cases++
		t.Run(strings.TrimSuffix(f.Name, ".rspec"), func(t *testing.T) {
			_, err := Parse(f.Name, f.Data)
			if err == nil {
				t.Fatalf("%s parsed without error", f.Name)
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("error %v does not match ErrInvalid", err)
			}
			var pe *Error
			if !errors.As(err, &pe) || pe.Pos.Line < 1 || pe.Pos.Col < 1 || pe.Pos.File != f.Name {
				t.Errorf("error %v carries no file:line:col", err)
			}
			first := strings.SplitN(err.Error(), "\n", 2)[0]
			if *update {
				want.Data = []byte(first + "\n")
				return
			}
			if got := first + "\n"; got != string(want.Data) {
				t.Errorf("first error:\n got %s want %s", got, want.Data)
			}
		})
	}
	if cases < 20 {
		t.Errorf("only %d malformed specs; the corpus must keep at least 20", cases)
	}
	if *update {
		if err := os.WriteFile(path, txtar.Format(ar), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestRRefSpecIsValid(t *testing.T) {
	p, err := RRef()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{
		"Fork":     {"unknown", "known", "deleted"},
		"Owner":    {"absent", "awaiting", "pending", "ready", "deleted", "failed"},
		"User":     {"pending", "pending_released", "confirmed", "draining", "deleted", "lost", "orphaned"},
		"ChildPin": {"pending", "accepted", "refused", "dropped"},
	}
	for _, m := range p.Machines {
		var got []string
		for _, s := range m.States {
			got = append(got, s.Name)
		}
		if strings.Join(got, " ") != strings.Join(want[m.Name], " ") {
			t.Errorf("machine %s states = %v, want %v", m.Name, got, want[m.Name])
		}
		delete(want, m.Name)
	}
	if len(want) > 0 {
		t.Errorf("machines missing from the RRef spec: %v", want)
	}
	for _, name := range []string{"S1", "S2", "S3", "S4", "S5", "L1", "L2"} {
		found := false
		for _, inv := range p.Invariants {
			found = found || inv.Name == name
		}
		if !found {
			t.Errorf("invariant %s is not declared", name)
		}
	}
}

func TestLookupAndControl(t *testing.T) {
	p, err := RRef()
	if err != nil {
		t.Fatal(err)
	}
	control := map[string]bool{}
	for _, m := range p.Messages {
		control[m.Name] = m.Control()
	}
	for _, name := range []string{"RemoteRet", "ForkRequest", "ForkAck", "ChildAccept", "UserDelete", "FetchCall"} {
		if !control[name] {
			t.Errorf("%s should be a control message (decodes without allocation)", name)
		}
	}
	if control["Call"] {
		t.Error("Call carries strings and lists; it is not a control message")
	}
	fork := p.Machines[0]
	if tr := fork.Lookup(fork.States[0], fork.Events[2]); tr != nil {
		t.Errorf("Fork: Delete in unknown should be illegal, got %+v", tr)
	}
}

func TestInvalidUTF8(t *testing.T) {
	_, err := Parse("x.rspec", []byte("protocol p;\nversion 1;\n\xff"))
	if err == nil || !strings.Contains(err.Error(), "x.rspec:3:1: invalid UTF-8") {
		t.Fatalf("got %v", err)
	}
}

func TestErrorListReportsEveryProblem(t *testing.T) {
	_, err := Parse("x.rspec", []byte("protocol p;\nversion 1;\nmessage A = 1 { x: Nope; }\nmessage B = 1 { y: Nada; }\n"))
	var list ErrorList
	if !errors.As(err, &list) || len(list) != 3 {
		t.Fatalf("want 3 errors (two unknown types, one duplicate code), got %v", err)
	}
}

func TestDocCommentsAttach(t *testing.T) {
	src := "/// The protocol.\nprotocol p;\nversion 1;\n/// A message.\nmessage A = 1 {\n    /// A field.\n    x: u8;\n}\n"
	p, err := Parse("x.rspec", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(p.Doc, ""); got != "The protocol." {
		t.Errorf("protocol doc = %q", got)
	}
	if got := p.Messages[0].Doc; len(got) != 1 || got[0] != "A message." {
		t.Errorf("message doc = %q", got)
	}
	if got := p.Messages[0].Fields[0].Doc; len(got) != 1 || got[0] != "A field." {
		t.Errorf("field doc = %q", got)
	}
}

func FuzzParse(f *testing.F) {
	f.Add(RRefSource)
	for _, c := range lineEndCases {
		f.Add([]byte(c.src))
	}
	if ar, err := txtar.ParseFile(filepath.Join("testdata", "invalid.txtar")); err == nil {
		for _, file := range ar.Files {
			if strings.HasSuffix(file.Name, ".rspec") {
				f.Add(file.Data)
			}
		}
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		p, err := Parse("fuzz.rspec", src)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error without ErrInvalid: %v", err)
			}
			var pe *Error
			if !errors.As(err, &pe) || pe.Pos.Line < 1 || pe.Pos.Col < 1 {
				t.Fatalf("error without position: %v", err)
			}
			return
		}
		for _, m := range p.Machines {
			if m.Start == nil {
				t.Fatalf("valid machine %s without start state", m.Name)
			}
		}
	})
}

// TestReadmeExample keeps the complete example in README.md valid.
func TestReadmeExample(t *testing.T) {
	data, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(data), "## A complete example\n\n```\n")
	if !ok {
		t.Fatal("README.md lost its complete example")
	}
	example, _, _ := strings.Cut(rest, "```")
	p, err := Parse("README.md", []byte(example))
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Machines) != 1 || len(p.Messages) != 2 || len(p.Invariants) != 1 {
		t.Fatalf("example resolved to %d machines, %d messages", len(p.Machines), len(p.Messages))
	}
}

func TestGoNames(t *testing.T) {
	cases := map[string]string{"call_id": "CallID", "rrefs": "RRefs", "rref": "RRef", "ForkRequest": "ForkRequest",
		"pending_released": "PendingReleased", "type_name": "TypeName", "ids": "IDs", "x": "X", "vm_id": "VMID"}
	init := Options{Initialisms: []string{"vm"}}.initialisms()
	for in, want := range cases {
		if got := GoName(in, init); got != want {
			t.Errorf("GoName(%q) = %q, want %q", in, got, want)
		}
	}
	if got := GoName("vm_id", DefaultInitialisms); got != "VmID" {
		t.Errorf("without the vm initialism: %q", got)
	}
	for in, want := range map[string]string{"RRefID": "rrefID", "IDs": "ids", "Fork": "fork"} {
		if got := LowerFirst(in, DefaultInitialisms); got != want {
			t.Errorf("LowerFirst(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestInitialismsOption: a spec resolved with an extra initialism names its
// Go declarations with it.
func TestInitialismsOption(t *testing.T) {
	src := []byte("protocol p;\nversion 1;\nmessage vm_info = 1 { vm_id: u32; }\n")
	p, err := ParseWith("x.rspec", src, Options{Initialisms: []string{"vm"}})
	if err != nil {
		t.Fatal(err)
	}
	if m := p.Messages[0]; m.GoName != "VMInfo" || m.Fields[0].GoName != "VMID" {
		t.Fatalf("%s %s", m.GoName, m.Fields[0].GoName)
	}
}

// TestBadTextIsRefused: text that would be copied into generated Go (doc
// comments, invariant descriptions) must be valid UTF-8 without control
// characters, and the error points at the bad byte.
func TestBadTextIsRefused(t *testing.T) {
	cases := map[string]string{
		"protocol p;\nversion 1;\n/// ok \x00 no\nmessage A = 1 { }\n":        "x.rspec:3:8: control character U+0000 in a comment",
		"protocol p;\nversion 1;\n/// bad \xff\nmessage A = 1 { }\n":          "x.rspec:3:9: invalid UTF-8 byte in a comment",
		"protocol p;\nversion 1;\ninvariant I \"a\x01b\";\n":                  "x.rspec:3:15: control character U+0001 in string",
		"protocol p;\nversion 1;\n// plain \x1b comment\nmessage A = 1 { }\n": "x.rspec:3:10: control character U+001B in a comment",
	}
	for src, want := range cases {
		_, err := Parse("x.rspec", []byte(src))
		if err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("%q: got %v, want %s", src, err, want)
		}
	}
	// A tab, a CRLF line end and non-ASCII text are fine.
	if _, err := Parse("x.rspec", []byte("protocol p;\r\nversion 1;\r\n/// größer\tals\r\nmessage A = 1 { }\r\ninvariant I \"ü\\n\";\n")); err != nil {
		t.Fatal(err)
	}
}

// TestReadFileStopsAtTheLimit: a spec larger than MaxSpecSize is refused
// having read no more than the limit, so a device that never ends is too.
func TestReadFileStopsAtTheLimit(t *testing.T) {
	path := filepath.Join(t.TempDir(), "big.rspec")
	if err := os.WriteFile(path, make([]byte, MaxSpecSize+1), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadFile(path); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "big.rspec:1:1") {
		t.Fatalf("oversized spec: %v", err)
	}
	if _, err := os.Stat("/dev/zero"); err == nil {
		if _, err := ReadFile("/dev/zero"); !errors.Is(err, ErrInvalid) {
			t.Fatalf("/dev/zero: %v", err)
		}
	}
}

// TestErrorsAreCapped: a spec with thirty thousand problems reports
// them all in the list, but its text names the first MaxErrorLines and
// counts the rest.
func TestErrorsAreCapped(t *testing.T) {
	var b strings.Builder
	b.WriteString("protocol p;\nversion 1;\n")
	for i := range 30_000 {
		fmt.Fprintf(&b, "message m%d = 1 {}\n", i)
	}
	_, err := Parse("x.rspec", []byte(b.String()))
	var list ErrorList
	if !errors.As(err, &list) || len(list) != 29_999 {
		t.Fatalf("got %d errors", len(list))
	}
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != MaxErrorLines+1 || lines[MaxErrorLines] != "(and 29979 more errors)" {
		t.Fatalf("%d lines, last %q", len(lines), lines[len(lines)-1])
	}
}

// TestHugeMachineChecksInLinearTime: a machine of 100,000 states in a
// chain, whose backward reachability once took a pass per state (minutes),
// and whose table lookups were linear in its transitions.
func TestHugeMachineChecksInLinearTime(t *testing.T) {
	const n = 100_000
	var b strings.Builder
	b.WriteString("protocol p;\nversion 1;\nmachine M {\nevent go;\n")
	for i := range n {
		switch i {
		case 0:
			b.WriteString("start ")
		case n - 1:
			b.WriteString("final ")
		}
		fmt.Fprintf(&b, "state s%d;\n", i)
	}
	for i := range n - 1 {
		fmt.Fprintf(&b, "on go: s%d -> s%d;\n", i, i+1)
	}
	b.WriteString("}\n")
	p, err := Parse("x.rspec", []byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	m := p.Machines[0]
	if tr := m.Lookup(m.States[n-2], m.Events[0]); tr == nil || tr.To != m.States[n-1] {
		t.Fatalf("lookup of the last transition: %+v", tr)
	}
}

// TestRecursiveStructs: a struct is recursive when it reaches itself
// through its fields' types, lists included, and only then: in a ring, on
// its own, not in a chain that merely leads to a ring.
func TestRecursiveStructs(t *testing.T) {
	src := `protocol p;
version 1;
struct lead { to: a; }
struct a { b: []b; }
struct b { c: c; }
struct c { a: [][]a; }
struct tree { kids: []tree; }
struct leaf { x: u8; }
struct holder { t: tree; l: []leaf; }
`
	p, err := Parse("x.rspec", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"lead": false, "a": true, "b": true, "c": true, "tree": true, "leaf": false, "holder": false}
	for _, s := range p.Structs {
		if s.Recursive != want[s.Name] {
			t.Errorf("struct %s: Recursive = %v, want %v", s.Name, s.Recursive, want[s.Name])
		}
		delete(want, s.Name)
	}
	if len(want) > 0 {
		t.Errorf("structs missing: %v", want)
	}
}
