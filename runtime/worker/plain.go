package worker

import (
	"encoding/binary"
	"fmt"
	"math"
	"reflect"
	"slices"
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

// sliceHeader is the memory of any slice.
type sliceHeader struct {
	data     unsafe.Pointer
	len, cap int
}

// The types Fast encodes itself, compared exactly: a named type (type ID
// int64) is laid out as a plain value, not as a varint.
var (
	typeBytes   = reflect.TypeFor[[]byte]()
	typeString  = reflect.TypeFor[string]()
	typeBool    = reflect.TypeFor[bool]()
	typeInt     = reflect.TypeFor[int]()
	typeInt64   = reflect.TypeFor[int64]()
	typeInt32   = reflect.TypeFor[int32]()
	typeUint64  = reflect.TypeFor[uint64]()
	typeUint32  = reflect.TypeFor[uint32]()
	typeFloat64 = reflect.TypeFor[float64]()
	typeFloat32 = reflect.TypeFor[float32]()
)

// encodeDirect is Fast's encoding of the value of type t at p for the types
// it lays out itself: the scalars above, and plain values and slices of
// them; ok is false for the rest. Generic code calls it with the address of
// a value it holds, which then need not be boxed in an interface (an
// allocation per call); p is only read.
func encodeDirect(t reflect.Type, p unsafe.Pointer) (b []byte, ok bool) {
	return appendDirect(nil, t, p)
}

// appendDirect is encodeDirect appended to dst, except that a []byte is
// returned as it is, not copied: the result may be the caller's own slice
// (see inBuffer).
func appendDirect(dst []byte, t reflect.Type, p unsafe.Pointer) (b []byte, ok bool) {
	switch t {
	case typeBytes:
		return *(*[]byte)(p), true
	case typeString:
		return append(dst, *(*string)(p)...), true
	case typeBool:
		if *(*bool)(p) {
			return append(dst, 1), true
		}
		return append(dst, 0), true
	case typeInt:
		return binary.AppendVarint(dst, int64(*(*int)(p))), true
	case typeInt64:
		return binary.AppendVarint(dst, *(*int64)(p)), true
	case typeInt32:
		return binary.AppendVarint(dst, int64(*(*int32)(p))), true
	case typeUint64:
		return binary.AppendUvarint(dst, *(*uint64)(p)), true
	case typeUint32:
		return binary.AppendUvarint(dst, uint64(*(*uint32)(p))), true
	case typeFloat64:
		return binary.LittleEndian.AppendUint64(dst, math.Float64bits(*(*float64)(p))), true
	case typeFloat32:
		return binary.LittleEndian.AppendUint32(dst, math.Float32bits(*(*float32)(p))), true
	}
	if t.Kind() == reflect.Slice {
		// A slice of plain elements is its length as a uvarint, then its elements.
		size := plainSize(t.Elem())
		if size == 0 {
			return nil, false
		}
		h := (*sliceHeader)(p)
		b := binary.AppendUvarint(slices.Grow(dst, binary.MaxVarintLen64+h.len*size), uint64(h.len))
		if h.len == 0 {
			return b, true
		}
		return append(b, plainBytes(h.data, h.len*size)...), true
	}
	size := plainSize(t)
	if size == 0 {
		return nil, false
	}
	return append(slices.Grow(dst, size), plainBytes(p, size)...), true
}

// decodeDirect decodes data into the value of type t at p when encodeDirect
// handles t, and reports whether it did; data of the wrong length is an
// error.
func decodeDirect(data []byte, t reflect.Type, p unsafe.Pointer) (ok bool, err error) {
	bad := func() error {
		return fmt.Errorf("%w: %d bytes are not a valid %s", ErrCodec, len(data), t)
	}
	varint := func(lo, hi int64) (int64, error) {
		x, n := binary.Varint(data)
		if n != len(data) || n <= 0 || x < lo || x > hi {
			return 0, bad()
		}
		return x, nil
	}
	uvarint := func(hi uint64) (uint64, error) {
		x, n := binary.Uvarint(data)
		if n != len(data) || n <= 0 || x > hi {
			return 0, bad()
		}
		return x, nil
	}
	switch t {
	case typeBytes:
		*(*[]byte)(p) = append([]byte(nil), data...)
	case typeString:
		*(*string)(p) = string(data)
	case typeBool:
		if len(data) != 1 || data[0] > 1 {
			return true, bad()
		}
		*(*bool)(p) = data[0] == 1
	case typeInt:
		x, err := varint(math.MinInt, math.MaxInt)
		*(*int)(p) = int(x)
		return true, err
	case typeInt64:
		x, err := varint(math.MinInt64, math.MaxInt64)
		*(*int64)(p) = x
		return true, err
	case typeInt32:
		x, err := varint(math.MinInt32, math.MaxInt32)
		*(*int32)(p) = int32(x)
		return true, err
	case typeUint64:
		x, err := uvarint(math.MaxUint64)
		*(*uint64)(p) = x
		return true, err
	case typeUint32:
		x, err := uvarint(math.MaxUint32)
		*(*uint32)(p) = uint32(x)
		return true, err
	case typeFloat64:
		if len(data) != 8 {
			return true, bad()
		}
		*(*float64)(p) = math.Float64frombits(binary.LittleEndian.Uint64(data))
	case typeFloat32:
		if len(data) != 4 {
			return true, bad()
		}
		*(*float32)(p) = math.Float32frombits(binary.LittleEndian.Uint32(data))
	default:
		return decodePlain(data, t, p, bad)
	}
	return true, nil
}

// decodePlain decodes a plain value, or a slice of them, at p.
func decodePlain(data []byte, t reflect.Type, p unsafe.Pointer, bad func() error) (bool, error) {
	if t.Kind() == reflect.Slice {
		size := plainSize(t.Elem())
		if size == 0 {
			return false, nil
		}
		n, k, ok := sliceLen(data, size)
		if !ok {
			return true, bad()
		}
		s := reflect.MakeSlice(t, n, n)
		if n > 0 {
			copy(plainBytes(s.UnsafePointer(), n*size), data[k:])
		}
		*(*sliceHeader)(p) = sliceHeader{data: s.UnsafePointer(), len: n, cap: n}
		return true, nil
	}
	size := plainSize(t)
	if size == 0 {
		return false, nil
	}
	if len(data) != size {
		return true, bad()
	}
	copy(plainBytes(p, size), data)
	return true, nil
}

// sliceLen reads the element count that prefixes an encoded slice of
// size-byte elements, and reports whether exactly that many follow.
func sliceLen(data []byte, size int) (n, k int, ok bool) {
	c, k := binary.Uvarint(data)
	if k <= 0 || c > uint64(len(data)-k)/uint64(size) || uint64(len(data)-k) != c*uint64(size) {
		return 0, 0, false
	}
	return int(c), k, true
}

// boxedData is the address of the value an interface holds, for the types
// encodeDirect handles (none of them is pointer-shaped, so the interface's
// data word points to a copy of the value).
func boxedData(v any) unsafe.Pointer { return (*[2]unsafe.Pointer)(unsafe.Pointer(&v))[1] }
