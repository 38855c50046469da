package spec

import (
	"fmt"
	"strings"
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
		case r == ' ' || r == '\t' || r == '\r' || r == '\n':
			l.advance(n)
		case r == '/':
			p := l.pos()
			rest := l.src[l.off:]
			if len(rest) < 2 || rest[1] != '/' {
				return token{}, errorf(p, "unexpected %q (comments start with //)", r)
			}
			end := len(rest)
			for i := 0; i < len(rest); i++ {
				if rest[i] == '\n' {
					end = i
					break
				}
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
			return token{}, errorf(p, "unexpected '[' (list types are written []T)")
		case r == ';' || r == ':' || r == '=' || r == '{' || r == '}' || r == '(' || r == ')' || r == ',':
			p := l.pos()
			l.advance(1)
			return token{kind: tokPunct, text: string(r), pos: p}, nil
		default:
			return token{}, errorf(l.pos(), "unexpected character %q", r)
		}
	}
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
		case isControl(r):
			return token{}, errorf(l.pos(), "control character %U in string (write \\n or \\t)", r)
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

// isControl reports a character that must not appear raw in a spec's text:
// a comment or string is copied into generated Go and documents. A byte
// order mark is one: Go refuses it anywhere past a file's start.
func isControl(r rune) bool { return r != '\t' && (r < 0x20 || r == 0x7f) || r == 0xfeff }

// badText finds the first invalid UTF-8 byte or control character in s
// (the byte offset and what it is), or -1.
func badText(s string) (int, string) {
	for i, r := range s {
		switch {
		case r == utf8.RuneError:
			if _, n := utf8.DecodeRuneInString(s[i:]); n == 1 {
				return i, "invalid UTF-8 byte"
			}
		case isControl(r) && r != '\r':
			return i, fmt.Sprintf("control character %U", r)
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
