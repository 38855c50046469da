package spec

import (
	"errors"
	"strings"
	"testing"
)

// lineEndCases are specs an editor could show otherwise than a reader of
// line feeds would read them, each with the start of the error that
// refuses it. Each was once accepted, reading fewer declarations than an
// editor shows. FuzzParse starts from them too.
var lineEndCases = []struct{ name, src, err string }{
	// Old Mac line ends: the first comment swallowed the rest of the file
	// (check said ok, 0 messages).
	{"cr only", "protocol p;\rversion 1;\r// the door\rmessage A = 1 { }\r",
		"x.rspec:1:12: carriage return not followed by a line feed"},
	{"cr only after a comment", "// the door\rprotocol p;\rversion 1;\rmessage A = 1 { }\r",
		"x.rspec:1:12: carriage return not followed by a line feed"},
	// A CR alone in a CRLF file dropped the declaration after it.
	{"lone cr in a crlf comment", "protocol p;\r\nversion 1;\r\n// note\rmessage B = 2 { }\r\nmessage A = 1 { }\r\n",
		"x.rspec:3:8: carriage return not followed by a line feed"},
	{"lone cr in a doc comment", "protocol p;\nversion 1;\n/// note\rmessage B = 2 { }\nmessage A = 1 { }\n",
		"x.rspec:3:9: carriage return not followed by a line feed"},
	{"lone cr at the end", "protocol p;\nversion 1;\n// note\r",
		"x.rspec:3:8: carriage return not followed by a line feed"},
	// The Unicode line ends hid the declarations after them in a comment.
	{"line separator in a comment", "protocol p;\nversion 1;\n// note\u2028message B = 2 { }\nmessage A = 1 { }\n",
		"x.rspec:3:8: line separator U+2028 (editors disagree whether it ends a line) in a comment"},
	{"paragraph separator in a comment", "protocol p;\nversion 1;\n// note\u2029message B = 2 { }\n",
		"x.rspec:3:8: line separator U+2029 (editors disagree whether it ends a line) in a comment"},
	{"next line in a doc comment", "protocol p;\nversion 1;\n/// note\u0085message B = 2 { }\nmessage A = 1 { }\n",
		"x.rspec:3:9: line separator U+0085 (editors disagree whether it ends a line) in a comment"},
	{"line separator in a string", "protocol p;\nversion 1;\ninvariant I \"a\u2028b\";\n",
		"x.rspec:3:15: line separator U+2028 (editors disagree whether it ends a line) in string"},
	{"line separator between declarations", "protocol p;\u2028version 1;\n",
		"x.rspec:1:12: unexpected line separator U+2028"},
	// A bidirectional override shows a comment's text, or what follows
	// it, in another order than it is read.
	{"bidi override in a comment", "protocol p;\nversion 1;\n// \u202e } ;1 = B egassem\n",
		"x.rspec:3:4: bidirectional formatting character U+202E (editors reorder the text around it) in a comment"},
	{"bidi isolate in a string", "protocol p;\nversion 1;\ninvariant I \"a\u2066b\";\n",
		"x.rspec:3:15: bidirectional formatting character U+2066 (editors reorder the text around it) in string"},
	{"c1 control in a string", "protocol p;\nversion 1;\ninvariant I \"a\u009bb\";\n",
		"x.rspec:3:15: control character U+009B in string"},
}

func TestLineEndsAsEditorsShowThem(t *testing.T) {
	for _, c := range lineEndCases {
		t.Run(c.name, func(t *testing.T) {
			p, err := Parse("x.rspec", []byte(c.src))
			if err == nil {
				t.Fatalf("accepted, reading %d messages", len(p.Messages))
			}
			var pe *Error
			if !errors.Is(err, ErrInvalid) || !errors.As(err, &pe) {
				t.Errorf("error %v is not a positioned ErrInvalid", err)
			}
			if !strings.HasPrefix(err.Error(), c.err) {
				t.Errorf("got  %v\nwant %s...", err, c.err)
			}
		})
	}
}

// TestLineEndsAccepted: LF, CRLF and a mix of the two end lines alike, in
// comments too, and the positions count the lines an editor shows.
func TestLineEndsAccepted(t *testing.T) {
	lines := []string{"protocol p;", "version 1;", "// a comment", "/// A doc.", "message A = 1 { }", "message B = 2 { }"}
	for name, sep := range map[string][]string{
		"lf":    {"\n"},
		"crlf":  {"\r\n"},
		"mixed": {"\r\n", "\n"},
	} {
		t.Run(name, func(t *testing.T) {
			var b strings.Builder
			for i, l := range lines {
				b.WriteString(l + sep[i%len(sep)])
			}
			p, err := Parse("x.rspec", []byte(b.String()))
			if err != nil {
				t.Fatal(err)
			}
			if len(p.Messages) != 2 {
				t.Fatalf("%d messages, want 2", len(p.Messages))
			}
			if a := p.Messages[0]; a.Pos.Line != 5 || a.Pos.Col != 9 || len(a.Doc) != 1 || a.Doc[0] != "A doc." {
				t.Errorf("message A at %s with doc %q, want line 5, col 9, doc \"A doc.\"", a.Pos, a.Doc)
			}
			if b := p.Messages[1]; b.Pos.Line != 6 {
				t.Errorf("message B at %s, want line 6", b.Pos)
			}
		})
	}
}
