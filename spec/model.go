package spec

import (
	"strconv"
	"sync"
)

// Kind is the shape of a resolved type.
type Kind int

const (
	KindU8 Kind = iota
	KindU16
	KindU32
	KindU64
	KindI64
	KindBool
	KindString
	KindBytes
	KindList
	KindEnum
	KindStruct
	// KindFixed64 is a uint64 sent as eight bytes, little-endian, where a
	// u64 is a uvarint: for values spread over the whole range (random
	// ids, hashes), which as uvarints take nine or ten bytes and a loop.
	KindFixed64
)

var scalarKinds = map[string]Kind{
	"u8": KindU8, "u16": KindU16, "u32": KindU32, "u64": KindU64, "i64": KindI64,
	"fixed64": KindFixed64, "bool": KindBool, "string": KindString, "bytes": KindBytes,
}

func (k Kind) String() string {
	for n, v := range scalarKinds {
		if v == k {
			return n
		}
	}
	switch k {
	case KindList:
		return "list"
	case KindEnum:
		return "enum"
	case KindStruct:
		return "struct"
	}
	return "?"
}

// IsUnsigned reports whether k is one of the unsigned integer kinds.
func (k Kind) IsUnsigned() bool { return k == KindU8 || k == KindU16 || k == KindU32 || k == KindU64 }

// MaxValue is the largest value an unsigned kind holds.
func (k Kind) MaxValue() uint64 {
	switch k {
	case KindU8:
		return 1<<8 - 1
	case KindU16:
		return 1<<16 - 1
	case KindU32:
		return 1<<32 - 1
	}
	return 1<<64 - 1
}

// NodeType is the built-in type of a node's name: a string on the wire,
// protocol.NodeID in Go, so that the explorer's world can rename the nodes
// a message, a timer or a record names when it declares them
// interchangeable (protocol/world's Config.Symmetric).
const NodeType = "node"

// Type is a resolved field or payload type.
type Type struct {
	Kind   Kind
	Node   bool    // KindString spelled node: a node's name (NodeType)
	Elem   *Type   // KindList
	Named  *Named  // set when a scalar came through a named type (type WorkerID = u32)
	Enum   *Enum   // KindEnum
	Struct *Struct // KindStruct
}

// Spelling is the type as written in the spec.
func (t *Type) Spelling() string {
	switch {
	case t.Kind == KindList:
		return "[]" + t.Elem.Spelling()
	case t.Named != nil:
		return t.Named.Name
	case t.Node:
		return NodeType
	case t.Kind == KindEnum:
		return t.Enum.Name
	case t.Kind == KindStruct:
		return t.Struct.Name
	}
	return t.Kind.String()
}

// EncodesEmpty reports whether every value of t encodes to no bytes: a
// struct whose fields all do (a list or scalar takes at least one byte).
func (t *Type) EncodesEmpty() bool {
	if t.Kind != KindStruct {
		return false
	}
	for _, f := range t.Struct.Fields {
		if !f.Type.EncodesEmpty() {
			return false
		}
	}
	return true
}

// AllocFree reports whether decoding t needs no heap allocation (no strings, lists).
// Bytes alias the input and do not allocate.
func (t *Type) AllocFree() bool {
	switch t.Kind {
	case KindString, KindList:
		return false
	case KindStruct:
		for _, f := range t.Struct.Fields {
			if !f.Type.AllocFree() {
				return false
			}
		}
	}
	return true
}

// Protocol is a resolved, validated spec: the generator's input.
type Protocol struct {
	Path       string // the source path as given, recorded in generated headers
	Name       string // also the Go package's name
	Version    int
	Doc        []string
	Named      []*Named
	Enums      []*Enum
	Structs    []*Struct // in dependency order: a struct follows the structs it contains
	Messages   []*Message
	Layouts    []*Layout
	Machines   []*Machine
	Invariants []*Invariant
}

type Named struct {
	Doc    []string
	Name   string
	GoName string
	Type   *Type // always a scalar
	Pos    Pos
}

type EnumValue struct {
	Doc    []string
	Name   string
	GoName string // the constant: the enum's Go name, then the value's
	Value  uint64
	Pos    Pos
}

type Enum struct {
	Doc    []string
	Name   string
	GoName string
	Base   Kind // an unsigned kind
	Values []*EnumValue
	Pos    Pos
}

type Field struct {
	Doc    []string
	Name   string
	GoName string
	Type   *Type
	Pos    Pos
}

type Struct struct {
	Doc    []string
	Name   string
	GoName string
	// Recursive is set when the struct holds itself, through lists of it
	// or of structs that hold it: its decoder counts the nesting.
	Recursive bool
	GoConsume string // a recursive struct's unexported decoder, which takes the nesting
	Fields    []*Field
	Pos       Pos
}

type Message struct {
	Doc    []string
	Name   string
	GoName string
	GoSlot string // the Decoder's unexported field that holds one
	Code   uint64
	Fields []*Field
	Pos    Pos
}

// Control reports whether the message decodes without allocating.
func (m *Message) Control() bool {
	for _, f := range m.Fields {
		if !f.Type.AllocFree() {
			return false
		}
	}
	return true
}

// LayoutKind is the type of a layout's field: each has a fixed size.
type LayoutKind int

const (
	LayoutU8      LayoutKind = iota // one byte
	LayoutBool                      // one byte, 0 or 1
	LayoutFixed16                   // two bytes, little-endian
	LayoutFixed32                   // four bytes, little-endian
	LayoutFixed64                   // eight bytes, little-endian
	LayoutBytes                     // [N]u8: N bytes as they are (Count N)
)

// layoutKinds are the scalar types a layout's field may have, and their sizes.
var layoutKinds = map[string]struct {
	kind LayoutKind
	size int
}{
	"u8": {LayoutU8, 1}, "bool": {LayoutBool, 1}, "fixed16": {LayoutFixed16, 2},
	"fixed32": {LayoutFixed32, 4}, "fixed64": {LayoutFixed64, 8},
}

// layoutOnly are the types only a layout's field may have.
var layoutOnly = map[string]string{"fixed16": "u16", "fixed32": "u32"}

// MaxLayoutArray bounds a layout's [N]u8 and MaxLayoutSize a whole layout:
// fixed frames are headers and handshakes, kilobytes at most; a larger
// fixed block is a message's bytes field.
const (
	MaxLayoutArray = 1 << 16
	MaxLayoutSize  = 1 << 20
)

// Layout is a fixed frame: its fields at fixed offsets, integers
// little-endian, in the order declared, with no tag, length or padding,
// as a handshake's hello or a shared ring's header is laid out. Its size
// is known before any byte is read.
type Layout struct {
	Doc    []string
	Name   string
	GoName string
	Fields []*LayoutField
	Size   int // bytes
	Pos    Pos
}

// LayoutField is one field of a layout.
type LayoutField struct {
	Doc    []string
	Name   string
	GoName string
	Kind   LayoutKind // an array's element's, for arrays of fixed16/32/64
	Count  int        // an array's length ([N]): 0 for a single value
	Offset int        // from the layout's first byte
	Size   int        // bytes
	Pos    Pos
}

// ElemSize is the size of one of the field's values (an array's element).
func (f *LayoutField) ElemSize() int {
	if f.Count > 0 {
		return f.Size / f.Count
	}
	return f.Size
}

// Spelling is the field's type as written in the spec.
func (f *LayoutField) Spelling() string {
	prefix := ""
	if f.Count > 0 {
		prefix = "[" + strconv.Itoa(f.Count) + "]"
	}
	switch f.Kind {
	case LayoutBytes:
		return prefix + "u8"
	case LayoutBool:
		return "bool"
	case LayoutFixed16:
		return prefix + "fixed16"
	case LayoutFixed32:
		return prefix + "fixed32"
	case LayoutFixed64:
		return prefix + "fixed64"
	}
	return "u8"
}

type State struct {
	Doc    []string
	Name   string
	GoName string // the constant: the machine's Go name, then the state's
	Index  int
	Start  bool
	Final  bool
	Hot    bool
	Pos    Pos
}

// EventSource is where an event comes from, which decides who may fire it.
type EventSource uint8

const (
	// SourceInternal: raised by the machine's own handlers (Raise), as a
	// guard's outcome picks the next transition.
	SourceInternal EventSource = iota
	// SourceMessage: a message delivered by the network.
	SourceMessage
	// SourceInput: fired by the application; the explorer fires it whenever
	// the table allows it and the handler's guard agrees.
	SourceInput
	// SourceTimer: fired by a timer a handler set, keyed by its payload.
	SourceTimer
)

func (s EventSource) String() string {
	switch s {
	case SourceMessage:
		return "message"
	case SourceInput:
		return "input"
	case SourceTimer:
		return "timer"
	}
	return "internal"
}

type Event struct {
	Doc     []string
	Name    string
	Source  EventSource
	GoName  string // the constant: the machine's Go name, "On", then the event's
	GoStep  string // for an event that carries a message: "Step" and GoName, the step taking it
	GoPart  string // the event's own Go name: its handler method is "On" and GoPart
	Index   int
	Pos     Pos
	Payload *Type    // a typed payload, or nil
	Message *Message // the message this event delivers, or nil for a local action
}

// PayloadSpelling names the event's payload as written, or "" for none.
func (e *Event) PayloadSpelling() string {
	switch {
	case e.Message != nil:
		return e.Message.Name
	case e.Payload != nil:
		return e.Payload.Spelling()
	}
	return ""
}

// Transition is one cell of a machine's table: a move, or an explicit ignore (To == nil).
type Transition struct {
	Doc   []string
	From  *State
	Event *Event
	To    *State // nil when the event is ignored in From
}

// MaxStates and MaxEvents bound one machine, far above any hand-written
// one: a generated transition table has a cell per state and event, and
// numbers them in 8, 16 or 32 bits as the machine needs.
const (
	MaxStates = 1 << 20
	MaxEvents = 1 << 16
)

type Machine struct {
	Doc         []string
	Name        string
	GoName      string
	GoTable     string // the unexported transition table
	GoEnvImpl   string // the unexported environment a handler is given, over a protocol.Host
	GoBridge    string // the unexported protocol.Machine that runs the handlers
	GoDispatch  string // the step from a decoded message, when some message is carried by exactly one event
	States      []*State
	Events      []*Event
	Start       *State
	Transitions []*Transition // in declaration order, ignores after moves
	Pos         Pos
	index       map[[2]int]*Transition // Lookup's, made on first use
	indexOnce   sync.Once
}

// Lookup returns the transition for (s, e), or nil when the pair is illegal.
// The first call indexes the transitions: a table of S states and E events
// is filled in S*E lookups.
func (m *Machine) Lookup(s *State, e *Event) *Transition {
	// Made once even when generators share the model across goroutines.
	m.indexOnce.Do(func() {
		m.index = make(map[[2]int]*Transition, len(m.Transitions))
		for _, t := range m.Transitions {
			k := [2]int{t.From.Index, t.Event.Index}
			if m.index[k] == nil {
				m.index[k] = t
			}
		}
	})
	return m.index[[2]int{s.Index, e.Index}]
}

type Invariant struct {
	Doc    []string
	Name   string
	GoName string // the constant: "Invariant", then the invariant's Go name
	Text   string
	Pos    Pos
}
