package worker

import (
	"encoding/binary"
	"reflect"
	"sync"
	"unsafe"
)

// A value whose memory is exactly its little-endian encoding (sized
// numbers, and arrays and structs of them with no padding, no blank field
// and no bool, whose bytes could be invalid) is copied as bytes, on a
// little-endian machine: the same bytes encoding/binary writes, without its
// reflection per field and element, which costs tens of nanoseconds each.

var littleEndian = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

var plainSizes sync.Map // reflect.Type -> int

// plainSize is t's size when its memory is its encoding, else 0.
func plainSize(t reflect.Type) int {
	if !littleEndian {
		return 0
	}
	if n, ok := plainSizes.Load(t); ok {
		return n.(int)
	}
	n := 0
	if isPlain(t) {
		n = int(t.Size())
	}
	plainSizes.Store(t, n)
	return n
}

func isPlain(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64, reflect.Complex64, reflect.Complex128:
		return true
	case reflect.Array:
		return t.Len() > 0 && isPlain(t.Elem())
	case reflect.Struct:
		sum := uintptr(0)
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			if f.Name == "_" || !isPlain(f.Type) || f.Offset != sum {
				return false
			}
			sum += f.Type.Size()
		}
		return t.NumField() > 0 && sum == t.Size()
	}
	return false
}

// plainBytes views the n bytes at p.
func plainBytes(p unsafe.Pointer, n int) []byte { return unsafe.Slice((*byte)(p), n) }

// marshalPlain encodes v if its type (or its slice's element type) is
// plain; a slice is its length as a uvarint, then its elements.
func marshalPlain(v any) ([]byte, bool) {
	rv := reflect.ValueOf(v)
	t := rv.Type()
	if t.Kind() == reflect.Slice {
		size := plainSize(t.Elem())
		if size == 0 {
			return nil, false
		}
		b := binary.AppendUvarint(make([]byte, 0, binary.MaxVarintLen64+rv.Len()*size), uint64(rv.Len()))
		if rv.Len() == 0 {
			return b, true
		}
		return append(b, plainBytes(rv.UnsafePointer(), rv.Len()*size)...), true
	}
	size := plainSize(t)
	if size == 0 {
		return nil, false
	}
	// v's interface holds a pointer to a copy of the value.
	p := (*[2]unsafe.Pointer)(unsafe.Pointer(&v))[1]
	return append(make([]byte, 0, size), plainBytes(p, size)...), true
}

// unmarshalPlain decodes into ptr (a non-nil pointer) if the pointed type
// (or its slice's element type) is plain; it reports whether it applied,
// and an error for data of the wrong length.
func unmarshalPlain(data []byte, ptr reflect.Value, bad func(string) error) (bool, error) {
	t := ptr.Elem().Type()
	if t.Kind() == reflect.Slice {
		size := plainSize(t.Elem())
		if size == 0 {
			return false, nil
		}
		n, k := binary.Uvarint(data)
		if k <= 0 || n > uint64(len(data)-k)/uint64(size) || uint64(len(data)-k) != n*uint64(size) {
			return true, bad(t.String())
		}
		s := reflect.MakeSlice(t, int(n), int(n))
		if n > 0 {
			copy(plainBytes(s.UnsafePointer(), int(n)*size), data[k:])
		}
		ptr.Elem().Set(s)
		return true, nil
	}
	size := plainSize(t)
	if size == 0 {
		return false, nil
	}
	if len(data) != size {
		return true, bad(t.String())
	}
	copy(plainBytes(ptr.UnsafePointer(), size), data)
	return true, nil
}
