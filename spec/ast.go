package spec

import (
	"errors"
	"fmt"
	"sort"
	"strings"
)

// Pos is a position in a spec file; lines and columns count from 1, columns in runes.
type Pos struct {
	File string
	Line int
	Col  int
}

func (p Pos) String() string {
	file := p.File
	if file == "" {
		file = "<spec>"
	}
	return fmt.Sprintf("%s:%d:%d", file, p.Line, p.Col)
}

// ErrInvalid is matched (errors.Is) by every error that reports bad spec input.
var ErrInvalid = errors.New("spec: invalid spec")

// Error is one positioned problem in a spec file.
type Error struct {
	Pos Pos
	Msg string
}

func (e *Error) Error() string        { return e.Pos.String() + ": " + e.Msg }
func (e *Error) Is(target error) bool { return target == ErrInvalid }

func errorf(p Pos, format string, args ...any) *Error {
	return &Error{Pos: p, Msg: fmt.Sprintf(format, args...)}
}

// ErrorList is every problem found in one spec, sorted by position.
type ErrorList []*Error

// MaxErrorLines is how many problems an ErrorList's text lists before it
// says how many more there are: the first ones are what a reader fixes.
const MaxErrorLines = 20

func (l ErrorList) Error() string {
	n := min(len(l), MaxErrorLines)
	parts := make([]string, n, n+1)
	for i := range n {
		parts[i] = l[i].Error()
	}
	if len(l) > n {
		parts = append(parts, fmt.Sprintf("(and %d more errors)", len(l)-n))
	}
	return strings.Join(parts, "\n")
}

func (l ErrorList) Is(target error) bool { return target == ErrInvalid && len(l) > 0 }

// Unwrap exposes the individual errors to errors.As.
func (l ErrorList) Unwrap() []error {
	out := make([]error, len(l))
	for i, e := range l {
		out[i] = e
	}
	return out
}

func (l ErrorList) sorted() ErrorList {
	sort.SliceStable(l, func(i, j int) bool {
		a, b := l[i].Pos, l[j].Pos
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		return a.Col < b.Col
	})
	return l
}

// The syntax tree, as parsed and before names are resolved.

type astFile struct {
	doc        []string
	protocol   *astName
	version    *astNumber
	types      []*astTypeDecl
	enums      []*astEnum
	structs    []*astStruct
	messages   []*astMessage
	layouts    []*astLayout
	machines   []*astMachine
	invariants []*astInvariant
}

type astName struct {
	name string
	pos  Pos
}

type astNumber struct {
	raw string
	pos Pos
}

type astTypeRef struct {
	list bool // []elem
	// array is a layout's fixed array's count as written ("32" of [32]u8),
	// with elem its element; "" for any other type.
	array string
	elem  *astTypeRef
	name  string
	pos   Pos
}

type astTypeDecl struct {
	doc  []string
	name astName
	typ  *astTypeRef
}

type astEnumValue struct {
	doc   []string
	name  astName
	value astNumber
}

type astEnum struct {
	doc    []string
	name   astName
	base   *astTypeRef
	values []*astEnumValue
}

type astField struct {
	doc  []string
	name astName
	typ  *astTypeRef
}

type astStruct struct {
	doc    []string
	name   astName
	fields []*astField
}

type astMessage struct {
	doc    []string
	name   astName
	code   astNumber
	fields []*astField
}

type astLayout struct {
	doc    []string
	name   astName
	fields []*astField
}

type astState struct {
	doc   []string
	name  astName
	start bool
	final bool
	hot   bool
}

type astEvent struct {
	doc     []string
	name    astName
	payload *astTypeRef // nil for a local action with no payload
	source  string      // "input", "timer" or "" (a message's, or raised by a handler)
	srcPos  Pos         // the source modifier's position
}

type astOn struct {
	doc   []string
	pos   Pos
	event astName
	from  []astName
	to    astName
}

type astIgnore struct {
	doc   []string
	pos   Pos
	event astName
	in    []astName
}

type astMachine struct {
	doc     []string
	name    astName
	states  []*astState
	events  []*astEvent
	ons     []*astOn
	ignores []*astIgnore
}

type astInvariant struct {
	doc  []string
	name astName
	text string
}
