package spec

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// tokenKind classifies a lexical token of the spec language.
type tokenKind int

const (
	tokEOF tokenKind = iota
	tokIdent
	tokInt
	tokString
	tokPunct // one of ; : = { } ( ) , and the two-rune tokens -> and []
	tokDoc   // a /// doc comment line, text without the slashes
)

func (k tokenKind) String() string {
	switch k {
	case tokEOF:
		return "end of file"
	case tokIdent:
		return "identifier"
	case tokInt:
		return "number"
	case tokString:
		return "string"
	case tokPunct:
		return "punctuation"
	case tokDoc:
		return "doc comment"
	}
	return "token"
}

type token struct {
	kind tokenKind
	text string // identifier, punctuation, raw number, or unquoted string / doc text
	pos  Pos
}

func (t token) describe() string {
	switch t.kind {
	case tokEOF:
		return "end of file"
	case tokString:
		return fmt.Sprintf("string %q", t.text)
	default:
		return fmt.Sprintf("%q", t.text)
	}
}

// lexer splits a spec file into tokens. It never panics on any input: every
// unexpected rune becomes a positioned error.
type lexer struct {
	file string
	src  string
	off  int
	line int
	col  int
}

func newLexer(file, src string) *lexer {
	return &lexer{file: file, src: src, line: 1, col: 1}
}

func (l *lexer) pos() Pos { return Pos{File: l.file, Line: l.line, Col: l.col} }

func (l *lexer) peekRune() (rune, int) {
	if l.off >= len(l.src) {
		return -1, 0
	}
	r, n := utf8.DecodeRuneInString(l.src[l.off:])
	return r, n
}

func (l *lexer) advance(n int) {
	for i := 0; i < n; {
		r, w := utf8.DecodeRuneInString(l.src[l.off:])
		if r == '\n' {
			l.line++
			l.col = 1
		} else {
			l.col++
		}
		l.off += w
		i += w
	}
}

func isLetter(r rune) bool { return r == '_' || ('a' <= r && r <= 'z') || ('A' <= r && r <= 'Z') }
func isDigit(r rune) bool  { return '0' <= r && r <= '9' }

// next returns the next token, or an error positioned at the offending rune.
func (l *lexer) next() (token, error) {
	for {
		r, n := l.peekRune()
		switch {
		case r == -1:
			return token{kind: tokEOF, pos: l.pos()}, nil
		case r == utf8.RuneError && n == 1:
			return token{}, errorf(l.pos(), "invalid UTF-8 byte")
		case r == '\r' && !l.crlf():
			return token{}, errorf(l.pos(), "%s", loneCR)
		case r == ' ' || r == '\t' || r == '\r' || r == '\n':
			l.advance(n)
		case r == '/':
			p := l.pos()
			rest := l.src[l.off:]
			if len(rest) < 2 || rest[1] != '/' {
				return token{}, errorf(p, "unexpected %q (comments start with //)", r)
			}
			// The comment ends where an editor ends the line: at a line
			// feed, or at the carriage return of a CRLF. A CR alone is
			// refused: editors disagree whether it ends a line.
			end := strings.IndexAny(rest, "\r\n")
			if end < 0 {
				end = len(rest)
			}
			line := rest[:end]
			if i, what := badText(line); i >= 0 {
				at := p
				at.Col += utf8.RuneCountInString(line[:i])
				return token{}, errorf(at, "%s in a comment", what)
			}
			if isDoc := len(line) >= 3 && line[2] == '/' && (len(line) == 3 || line[3] != '/'); isDoc && plusBuild(line[3:]) {
				return token{}, errorf(p, "a doc line starting with +build would become a Go build constraint in the generated code")
			}
			l.advance(end)
			if r, _ := l.peekRune(); r == '\r' && !l.crlf() {
				return token{}, errorf(l.pos(), "%s", loneCR)
			}
			if len(line) >= 3 && line[2] == '/' && (len(line) == 3 || line[3] != '/') {
				text := line[3:]
				if len(text) > 0 && text[0] == ' ' {
					text = text[1:]
				}
				return token{kind: tokDoc, text: trimRight(text), pos: p}, nil
			}
		case isLetter(r):
			p := l.pos()
			start := l.off
			for {
				r, n := l.peekRune()
				if !isLetter(r) && !isDigit(r) {
					break
				}
				l.advance(n)
			}
			return token{kind: tokIdent, text: l.src[start:l.off], pos: p}, nil
		case isDigit(r) || r == '-' && l.off+1 < len(l.src) && isDigit(rune(l.src[l.off+1])):
			p := l.pos()
			start := l.off
			l.advance(1)
			for {
				r, n := l.peekRune()
				if !isLetter(r) && !isDigit(r) {
					break
				}
				l.advance(n)
			}
			return token{kind: tokInt, text: l.src[start:l.off], pos: p}, nil
		case r == '"':
			return l.lexString()
		case r == '-':
			p := l.pos()
			if l.off+1 < len(l.src) && l.src[l.off+1] == '>' {
				l.advance(2)
				return token{kind: tokPunct, text: "->", pos: p}, nil
			}
			return token{}, errorf(p, "unexpected '-' (did you mean '->'?)")
		case r == '[':
			p := l.pos()
			if l.off+1 < len(l.src) && l.src[l.off+1] == ']' {
				l.advance(2)
				return token{kind: tokPunct, text: "[]", pos: p}, nil
			}
			// [N]: a layout's fixed array, its count in decimal digits.
			end := l.off + 1
			for end < len(l.src) && end-l.off <= maxArrayDigits && l.src[end] >= '0' && l.src[end] <= '9' {
				end++
			}
			if end > l.off+1 && end < len(l.src) && l.src[end] == ']' {
				text := l.src[l.off : end+1]
				l.advance(end + 1 - l.off)
				return token{kind: tokPunct, text: text, pos: p}, nil
			}
			return token{}, errorf(p, "unexpected '[' (list types are written []T, a layout's arrays [N]u8)")
		case r == ';' || r == ':' || r == '=' || r == '{' || r == '}' || r == '(' || r == ')' || r == ',':
			p := l.pos()
			l.advance(1)
			return token{kind: tokPunct, text: string(r), pos: p}, nil
		case isLineSeparator(r) || isBidi(r):
			return token{}, errorf(l.pos(), "unexpected %s", badRune(r))
		default:
			return token{}, errorf(l.pos(), "unexpected character %q", r)
		}
	}
}

// maxArrayDigits bounds the digits of an array's count the lexer takes:
// more than any count the resolver accepts (MaxLayoutArray), few enough
// that a run of digits is not read without end.
const maxArrayDigits = 8

// loneCR is the error for a carriage return not followed by a line feed.
// Editors disagree on it: most show a line break (a file of old Mac line
// ends as lines), vim and Go's own scanner do not (one long line). Read
// either way, a comment could hide, or show, the declarations after it.
const loneCR = "carriage return not followed by a line feed: editors disagree whether it ends a line (use LF or CRLF line ends)"

// crlf reports whether the lexer stands on the CR of a CRLF pair.
func (l *lexer) crlf() bool {
	return l.off+1 < len(l.src) && l.src[l.off] == '\r' && l.src[l.off+1] == '\n'
}

func (l *lexer) lexString() (token, error) {
	p := l.pos()
	l.advance(1) // opening quote
	var out []byte
	for {
		r, n := l.peekRune()
		switch {
		case r == -1 || r == '\n':
			return token{}, errorf(p, "unterminated string")
		case r == utf8.RuneError && n == 1:
			return token{}, errorf(l.pos(), "invalid UTF-8 byte in string")
		case badRune(r) != "":
			if isControl(r) {
				return token{}, errorf(l.pos(), "%s in string (write \\n or \\t)", badRune(r))
			}
			return token{}, errorf(l.pos(), "%s in string", badRune(r))
		case r == '"':
			l.advance(1)
			return token{kind: tokString, text: string(out), pos: p}, nil
		case r == '\\':
			ep := l.pos()
			l.advance(1)
			e, m := l.peekRune()
			switch e {
			case '"', '\\':
				out = append(out, byte(e))
			case 'n':
				out = append(out, '\n')
			case 't':
				out = append(out, '\t')
			default:
				return token{}, errorf(ep, "unknown escape sequence in string")
			}
			l.advance(m)
		default:
			out = utf8.AppendRune(out, r)
			l.advance(n)
		}
	}
}

// isControl reports a control character (C0, DEL or C1; a tab is text) or
// a byte order mark: none may appear raw in a comment or string, which
// are copied into generated Go and documents, and Go refuses a byte order
// mark anywhere past a file's start.
func isControl(r rune) bool { return r != '\t' && unicode.IsControl(r) || r == 0xfeff }

// isLineSeparator reports the Unicode line ends beside CR and LF: next
// line (a C1 control), line separator and paragraph separator. Some
// editors break the line at them and some do not, so a comment holding
// one could hide the declarations an editor shows on the next line.
func isLineSeparator(r rune) bool { return r == '\u0085' || r == '\u2028' || r == '\u2029' }

// isBidi reports the Unicode bidirectional embeddings, overrides and
// isolates: an editor reorders the text around them, so a comment or
// string can be shown to hold what it does not (CVE-2021-42574).
func isBidi(r rune) bool { return '\u202a' <= r && r <= '\u202e' || '\u2066' <= r && r <= '\u2069' }

// badRune describes a character that must not appear raw in a comment or
// string, or returns "" for one that may.
func badRune(r rune) string {
	switch {
	case isLineSeparator(r):
		return fmt.Sprintf("line separator %U (editors disagree whether it ends a line)", r)
	case isBidi(r):
		return fmt.Sprintf("bidirectional formatting character %U (editors reorder the text around it)", r)
	case isControl(r):
		return fmt.Sprintf("control character %U", r)
	}
	return ""
}

// badText finds the first invalid UTF-8 byte or character badRune refuses
// in s (the byte offset and what it is), or -1.
func badText(s string) (int, string) {
	for i, r := range s {
		if r == utf8.RuneError {
			if _, n := utf8.DecodeRuneInString(s[i:]); n == 1 {
				return i, "invalid UTF-8 byte"
			}
		}
		if what := badRune(r); what != "" {
			return i, what
		}
	}
	return -1, ""
}

// plusBuild reports a line Go would read as an old-style build constraint
// once written as a comment.
func plusBuild(s string) bool { return strings.HasPrefix(strings.TrimSpace(s), "+build") }

func trimRight(s string) string {
	for len(s) > 0 && (s[len(s)-1] == ' ' || s[len(s)-1] == '\t' || s[len(s)-1] == '\r') {
		s = s[:len(s)-1]
	}
	return s
}
