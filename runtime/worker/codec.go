package worker

import (
	"bytes"
	"encoding/binary"
	"encoding/gob"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sync"
)

// Codec turns values into bytes and back. The default, Fast, encodes []byte,
// string, bool, integers and floats directly and falls back to gob for
// everything else; JSON is available for interoperable payloads.
type Codec interface {
	Marshal(v any) ([]byte, error)
	// Unmarshal decodes data into the value v points to.
	Unmarshal(data []byte, v any) error
}

// ErrCodec is matched by every encoding and decoding error.
var ErrCodec = errors.New("worker: codec")

type fastCodec struct{}

// Fast is the default codec.
var Fast Codec = fastCodec{}

// fastCodec reports whether w encodes with Fast, whose layouts the calls
// read and write in place. By type, not by comparing with the variable
// Fast, which a program may reassign (to wrap it, say).
func (w *Worker) fastCodec() bool {
	_, ok := w.cfg.Codec.(fastCodec)
	return ok
}

// JSON encodes with encoding/json.
var JSON Codec = jsonCodec{}

// Gob encodes with encoding/gob.
var Gob Codec = gobCodec{}

func (fastCodec) Marshal(v any) ([]byte, error) {
	if v == nil {
		return Gob.Marshal(v)
	}
	// Scalars, strings and bytes, plain values (arrays and structs of sized
	// numbers) and slices of them are laid out directly; a fresh gob stream
	// would re-send and re-compile type information for every message.
	t := reflect.TypeOf(v)
	if b, ok := encodeDirect(t, boxedData(v)); ok {
		return b, nil
	}
	if t.Kind() == reflect.Slice && fixedSize(t.Elem()) > 0 {
		b := binary.AppendUvarint(nil, uint64(reflect.ValueOf(v).Len()))
		return binary.Append(b, binary.LittleEndian, v)
	}
	if size := fixedSize(t); size > 0 {
		return binary.Append(make([]byte, 0, size), binary.LittleEndian, v)
	}
	return Gob.Marshal(v)
}

// fixedSizes caches fixedSize by type: finding it makes a zero value.
var fixedSizes sync.Map // reflect.Type -> int

// fixedSize is the encoded size of t when encoding/binary lays it out
// directly, else 0.
func fixedSize(t reflect.Type) int {
	if n, ok := fixedSizes.Load(t); ok {
		return n.(int)
	}
	n := 0
	switch t.Kind() {
	case reflect.Array, reflect.Struct, reflect.Bool, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64:
		n = max(binary.Size(reflect.Zero(t).Interface()), 0)
	}
	fixedSizes.Store(t, n)
	return n
}

func (fastCodec) Unmarshal(data []byte, v any) error {
	bad := func(what string) error {
		return fmt.Errorf("%w: %d bytes are not a valid %s", ErrCodec, len(data), what)
	}
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return fmt.Errorf("%w: Unmarshal needs a non-nil pointer, not %T", ErrCodec, v)
	}
	if done, err := decodeDirect(data, rv.Type().Elem(), rv.UnsafePointer()); done {
		return err
	}
	t := rv.Elem().Type()
	if t.Kind() == reflect.Slice {
		if size := fixedSize(t.Elem()); size > 0 {
			n, k, ok := sliceLen(data, size)
			if !ok {
				return bad(t.String())
			}
			s := reflect.MakeSlice(t, n, n)
			if _, err := binary.Decode(data[k:], binary.LittleEndian, s.Interface()); err != nil {
				return bad(t.String())
			}
			rv.Elem().Set(s)
			return nil
		}
	}
	if size := fixedSize(t); size > 0 {
		if len(data) != size {
			return bad(t.String())
		}
		if _, err := binary.Decode(data, binary.LittleEndian, v); err != nil {
			return bad(t.String())
		}
		return nil
	}
	return Gob.Unmarshal(data, v)
}

type gobCodec struct{}

func (gobCodec) Marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	if err := gob.NewEncoder(&b).Encode(v); err != nil {
		return nil, fmt.Errorf("%w: gob: %v", ErrCodec, err)
	}
	return b.Bytes(), nil
}

func (gobCodec) Unmarshal(data []byte, v any) error {
	if err := gob.NewDecoder(bytes.NewReader(data)).Decode(v); err != nil {
		return fmt.Errorf("%w: gob: %v", ErrCodec, err)
	}
	return nil
}

type jsonCodec struct{}

func (jsonCodec) Marshal(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("%w: json: %v", ErrCodec, err)
	}
	return b, nil
}

func (jsonCodec) Unmarshal(data []byte, v any) error {
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("%w: json: %v", ErrCodec, err)
	}
	return nil
}
