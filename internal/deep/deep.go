// Package deep copies Go values and encodes them canonically, by
// reflection, so that a model's state made of plain Go values (a
// protocol's handlers) needs no hand-written Clone or AppendState.
//
// Both follow pointers, slices, maps and interfaces, exported fields or
// not. A copy shares nothing with its original and keeps the sharing
// within it (two pointers to one value still point to one value). An
// encoding depends only on the values reached, not on addresses or on map
// order: two values encode alike exactly when they are equal field by
// field, with shared pointers in the same places. Funcs, channels and
// unsafe pointers have no copy and no encoding: ErrUnsupported, naming
// where the value holds one.
//
// AppendNames and CopyNames treat the values of one string type as names
// and rename them, wherever they are (fields, lists, map keys, interfaces),
// so that a model can encode or copy itself with its instances renamed; a
// map keyed by names is encoded in the order of its renamed keys.
package deep

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"sync"
	"unsafe"
)

// ErrUnsupported is matched (errors.Is) by the error of a value that holds
// a func, a channel or an unsafe pointer.
var ErrUnsupported = errors.New("deep: value holds a func, channel or unsafe pointer")

// Copy returns a deep copy of v.
func Copy[T any](v T) (T, error) { return CopyNames(v, nil) }

// Append appends the canonical encoding of v to b.
func Append(b []byte, v any) ([]byte, error) { return AppendNames(b, v, nil) }

// Names says how AppendNames and CopyNames treat the values of one string
// type: the names of the instances a model renames (protocol.NodeID).
type Names struct {
	// Type is the names' type, of kind string.
	Type reflect.Type
	// Rename is each name's new value (nil keeps them).
	Rename func(string) string
	// Other, if set, is called with every string of another type that
	// AppendNames meets; its error stops the encoding, which fails with
	// it and where the string is. CopyNames does not call it.
	Other func(s string) error
}

// CopyNames returns a deep copy of v with the names n says renamed (n
// nil: a plain copy).
func CopyNames[T any](v T, n *Names) (T, error) {
	src := reflect.ValueOf(&v).Elem()
	c := copier{seen: map[ptrKey]reflect.Value{}, names: n}
	if flat(src.Type()) && !c.renames(src.Type()) {
		return v, nil
	}
	var out T
	if err := c.into(reflect.ValueOf(&out).Elem(), src, ""); err != nil {
		// Again, naming where: paths are made only for errors.
		c = copier{seen: map[ptrKey]reflect.Value{}, names: n, paths: true}
		var again T
		if err2 := c.into(reflect.ValueOf(&again).Elem(), src, "value"); err2 != nil {
			err = err2
		}
		return out, err
	}
	return out, nil
}

// AppendNames appends the canonical encoding of v with the names n says
// renamed, which is the encoding of CopyNames(v, n) (n nil: Append).
func AppendNames(b []byte, v any, n *Names) ([]byte, error) {
	e := encoder{b: b, names: n}
	root := reflect.New(reflect.TypeOf(&v).Elem()).Elem()
	root.Set(reflect.ValueOf(&v).Elem())
	err := e.value(root, "")
	if err != nil {
		// Again, naming where: paths are made only for errors.
		again := encoder{names: n, paths: true}
		if err2 := again.value(root, "value"); err2 != nil {
			err = err2
		}
	}
	return e.b, err
}

// paths says whether a walk names where it is: only once it failed, to
// say where (making the paths costs more than the walk).
type paths bool

func (p paths) field(path string, t reflect.Type, i int) string {
	if !p {
		return ""
	}
	return path + "." + t.Field(i).Name
}

func (p paths) index(path string, i int) string {
	if !p {
		return ""
	}
	return path + "[" + strconv.Itoa(i) + "]"
}

func (p paths) deref(path string) string {
	if !p {
		return ""
	}
	return "(*" + path + ")"
}

func (p paths) key(path string) string {
	if !p {
		return ""
	}
	return path + " key"
}

func (p paths) value(path string, key reflect.Value) string {
	if !p {
		return ""
	}
	if !key.IsValid() {
		return path + "[...]"
	}
	return path + "[" + fmt.Sprint(key) + "]"
}

// mentions caches which types may hold a value of another: the names a
// copy must walk to rename. An interface may hold anything.
var mentionsCache sync.Map // [2]reflect.Type -> bool

func mentions(t, target reflect.Type) bool {
	k := [2]reflect.Type{t, target}
	if m, ok := mentionsCache.Load(k); ok {
		return m.(bool)
	}
	m := computeMentions(t, target, map[reflect.Type]bool{})
	mentionsCache.Store(k, m)
	return m
}

func computeMentions(t, target reflect.Type, visiting map[reflect.Type]bool) bool {
	if t == target {
		return true
	}
	if visiting[t] {
		return false
	}
	visiting[t] = true
	switch t.Kind() {
	case reflect.Interface:
		return true
	case reflect.Pointer, reflect.Slice, reflect.Array:
		return computeMentions(t.Elem(), target, visiting)
	case reflect.Map:
		return computeMentions(t.Key(), target, visiting) || computeMentions(t.Elem(), target, visiting)
	case reflect.Struct:
		for i := range t.NumField() {
			if computeMentions(t.Field(i).Type, target, visiting) {
				return true
			}
		}
	}
	return false
}

// ptrKey is a pointer's identity: its address and its type (a struct and
// its first field share an address).
type ptrKey struct {
	addr uintptr
	t    reflect.Type
}

// flats caches which types hold nothing to follow: a copy of such a value
// is the value.
var flats sync.Map // reflect.Type -> bool

func flat(t reflect.Type) bool {
	if f, ok := flats.Load(t); ok {
		return f.(bool)
	}
	f := computeFlat(t, map[reflect.Type]bool{})
	flats.Store(t, f)
	return f
}

func computeFlat(t reflect.Type, visiting map[reflect.Type]bool) bool {
	switch t.Kind() {
	case reflect.Pointer, reflect.Slice, reflect.Map, reflect.Interface, reflect.Func, reflect.Chan, reflect.UnsafePointer:
		return false
	case reflect.Array:
		return computeFlat(t.Elem(), visiting)
	case reflect.Struct:
		if visiting[t] {
			return false
		}
		visiting[t] = true
		for i := range t.NumField() {
			if !computeFlat(t.Field(i).Type, visiting) {
				return false
			}
		}
	}
	return true
}

// open makes v settable and readable whatever the fields it came through
// were: v must be addressable.
func open(v reflect.Value) reflect.Value {
	if v.CanSet() {
		return v
	}
	return reflect.NewAt(v.Type(), unsafe.Pointer(v.UnsafeAddr())).Elem()
}

// addressable returns v, or a settable copy of it when it is not
// addressable (a map's value, an interface's), so that open works on its
// fields.
func addressable(v reflect.Value) reflect.Value {
	if v.CanAddr() {
		return open(v)
	}
	a := reflect.New(v.Type()).Elem()
	a.Set(v)
	return a
}

func unsupported(path string, t reflect.Type) error {
	return fmt.Errorf("%w: %s is a %s", ErrUnsupported, path, t)
}

type copier struct {
	seen  map[ptrKey]reflect.Value // original pointer -> its copy
	names *Names
	paths
}

// renames reports whether a value of type t may hold names to rename.
func (c *copier) renames(t reflect.Type) bool {
	return c.names != nil && c.names.Rename != nil && mentions(t, c.names.Type)
}

// into copies src into dst, which is settable.
func (c *copier) into(dst, src reflect.Value, path string) error {
	t := src.Type()
	if flat(t) && !c.renames(t) {
		dst.Set(src)
		return nil
	}
	switch t.Kind() {
	case reflect.String: // a name: the only flat type renames reaches
		dst.Set(reflect.ValueOf(c.names.Rename(src.String())).Convert(t))
		return nil
	case reflect.Pointer:
		if src.IsNil() {
			return nil
		}
		k := ptrKey{src.Pointer(), t}
		if p, ok := c.seen[k]; ok {
			dst.Set(p)
			return nil
		}
		p := reflect.New(t.Elem())
		c.seen[k] = p
		dst.Set(p)
		return c.into(p.Elem(), open(src.Elem()), c.deref(path))
	case reflect.Slice:
		if src.IsNil() {
			return nil
		}
		s := reflect.MakeSlice(t, src.Len(), src.Len())
		for i := range src.Len() {
			if err := c.into(s.Index(i), open(src.Index(i)), c.index(path, i)); err != nil {
				return err
			}
		}
		dst.Set(s)
		return nil
	case reflect.Array:
		src = addressable(src)
		for i := range src.Len() {
			if err := c.into(dst.Index(i), open(src.Index(i)), c.index(path, i)); err != nil {
				return err
			}
		}
		return nil
	case reflect.Map:
		if src.IsNil() {
			return nil
		}
		m := reflect.MakeMapWithSize(t, src.Len())
		it := src.MapRange()
		for it.Next() {
			k := reflect.New(t.Key()).Elem()
			if err := c.into(k, it.Key(), c.key(path)); err != nil {
				return err
			}
			v := reflect.New(t.Elem()).Elem()
			if err := c.into(v, it.Value(), c.paths.value(path, it.Key())); err != nil {
				return err
			}
			m.SetMapIndex(k, v)
		}
		dst.Set(m)
		return nil
	case reflect.Interface:
		if src.IsNil() {
			return nil
		}
		e := src.Elem()
		v := reflect.New(e.Type()).Elem()
		if err := c.into(v, e, path); err != nil {
			return err
		}
		dst.Set(v)
		return nil
	case reflect.Struct:
		src = addressable(src)
		for i := range t.NumField() {
			if err := c.into(open(dst.Field(i)), open(src.Field(i)), c.field(path, t, i)); err != nil {
				return err
			}
		}
		return nil
	}
	return unsupported(path, t)
}

type encoder struct {
	b       []byte
	seen    []ptrKey       // the pointers met, numbered in the order first met
	numbers map[ptrKey]int // seen's numbers, once there are many
	names   *Names
	paths
}

// number is pointer k's number, and whether it was met before.
func (e *encoder) number(k ptrKey) (int, bool) {
	if e.numbers != nil {
		if n, ok := e.numbers[k]; ok {
			return n, true
		}
	} else if n := slices.Index(e.seen, k); n >= 0 {
		return n, true
	}
	n := len(e.seen)
	e.seen = append(e.seen, k)
	if e.numbers != nil {
		e.numbers[k] = n
	} else if len(e.seen) > 16 {
		e.numbers = map[ptrKey]int{}
		for i, p := range e.seen {
			e.numbers[p] = i
		}
	}
	return n, false
}

// Tags that keep a nil apart from an empty value, and a pointer met
// again apart from a first one.
const (
	tagNil = iota
	tagNew
	tagSeen
	tagValue
)

func (e *encoder) uint(v uint64) { e.b = binary.AppendUvarint(e.b, v) }

func (e *encoder) value(v reflect.Value, path string) error {
	t := v.Type()
	switch t.Kind() {
	case reflect.Bool:
		if v.Bool() {
			e.b = append(e.b, 1)
		} else {
			e.b = append(e.b, 0)
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		e.b = binary.AppendVarint(e.b, v.Int())
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		e.uint(v.Uint())
	case reflect.Float32, reflect.Float64:
		e.uint(math.Float64bits(v.Float()))
	case reflect.Complex64, reflect.Complex128:
		e.uint(math.Float64bits(real(v.Complex())))
		e.uint(math.Float64bits(imag(v.Complex())))
	case reflect.String:
		s := v.String()
		switch n := e.names; {
		case n == nil:
		case t == n.Type && n.Rename != nil:
			s = n.Rename(s)
		case t != n.Type && n.Other != nil:
			if err := n.Other(s); err != nil {
				return fmt.Errorf("%w, at %s", err, path)
			}
		}
		e.uint(uint64(len(s)))
		e.b = append(e.b, s...)
	case reflect.Pointer:
		if v.IsNil() {
			e.b = append(e.b, tagNil)
			return nil
		}
		if n, met := e.number(ptrKey{v.Pointer(), t}); met {
			e.b = append(e.b, tagSeen)
			e.uint(uint64(n))
			return nil
		}
		e.b = append(e.b, tagNew)
		return e.value(v.Elem(), e.deref(path))
	case reflect.Slice, reflect.Array:
		// Values are only read, which reflect allows through unexported
		// fields too: nothing is copied to be opened, but an array of bytes
		// that Bytes needs addressable.
		e.uint(uint64(v.Len()))
		if t.Elem().Kind() == reflect.Uint8 {
			if t.Kind() == reflect.Array && !v.CanAddr() {
				v = addressable(v)
			}
			e.b = append(e.b, v.Bytes()...)
			return nil
		}
		for i := range v.Len() {
			if err := e.value(v.Index(i), e.index(path, i)); err != nil {
				return err
			}
		}
	case reflect.Map:
		return e.mapValue(v, path)
	case reflect.Interface:
		if v.IsNil() {
			e.b = append(e.b, tagNil)
			return nil
		}
		el := v.Elem()
		e.b = append(e.b, tagValue)
		name := el.Type().String()
		e.uint(uint64(len(name)))
		e.b = append(e.b, name...)
		return e.value(el, path)
	case reflect.Struct:
		for i := range t.NumField() {
			if err := e.value(v.Field(i), e.field(path, t, i)); err != nil {
				return err
			}
		}
	default:
		return unsupported(path, t)
	}
	return nil
}

// mapValue encodes a map's entries in the order of their keys' encodings,
// so that iteration order does not show.
func (e *encoder) mapValue(v reflect.Value, path string) error {
	type entry struct {
		from, to int // its key's encoding in keys.b
		val      reflect.Value
	}
	entries := make([]entry, 0, v.Len())
	// Each key is encoded on its own (its pointers numbered afresh), one
	// after another in one buffer.
	keys := encoder{names: e.names, paths: e.paths}
	it := v.MapRange()
	for it.Next() {
		from := len(keys.b)
		keys.seen, keys.numbers = keys.seen[:0], nil
		if err := keys.value(it.Key(), e.key(path)); err != nil {
			return err
		}
		entries = append(entries, entry{from, len(keys.b), it.Value()})
	}
	key := func(en entry) []byte { return keys.b[en.from:en.to] }
	slices.SortFunc(entries, func(a, b entry) int { return bytes.Compare(key(a), key(b)) })
	e.uint(uint64(len(entries)))
	for _, en := range entries {
		e.uint(uint64(en.to - en.from))
		e.b = append(e.b, key(en)...)
		if err := e.value(en.val, e.paths.value(path, reflect.Value{})); err != nil {
			return err
		}
	}
	return nil
}
