package gen

import (
	"strings"
)

func docText(doc []string) string { return strings.Join(doc, "\n") }

// comment renders text as line comments, "// " before every line, for
// jen.Comment to write as they are. jen would turn a text of several lines
// into one /* */ block, which a "*/" in a spec's doc or invariant text
// ends early, and would write a text starting with "/*" raw.
func comment(text string) string {
	lines := strings.Split(text, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight("// "+l, " ")
	}
	return strings.Join(lines, "\n")
}
