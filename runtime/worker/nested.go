package worker

import (
	"encoding/json"
	"fmt"
	"reflect"
	"runtime"
	"strconv"
	"sync"
	"time"

	"github.com/rrefkit/rref/genrt"
	"github.com/rrefkit/rref/runtime/core"
)

// RRefs nested in an argument or result (a struct field, a slice, array or
// map element, behind pointers) travel too. The value is encoded with the
// worker's codec, each RRef as the sender's handle number (RRef implements
// gob's and JSON's encoder interfaces); the encoding is preceded by the
// list of those handles, whose order is the order the core forks them in.
// The receiver decodes the value, then binds each RRef in place to the
// handle the core made for it. Only exported fields are searched, as gob
// and JSON only encode those; an RRef held in an interface-typed field is
// not found: its encoding fails, or, if its type was registered with gob,
// it arrives unbound and its methods fail with ErrUnbound.

// holdsRRefs reports whether a value of type t may hold an RRef below its
// top level.
func holdsRRefs(t reflect.Type) bool {
	if v, ok := holdsCache.Load(t); ok {
		return v.(bool)
	}
	v := searchType(t, map[reflect.Type]bool{}, true)
	holdsCache.Store(t, v)
	return v
}

var (
	holdsCache sync.Map // reflect.Type -> bool
	rrefIface  = reflect.TypeFor[rrefArg]()
)

func searchType(t reflect.Type, seen map[reflect.Type]bool, top bool) bool {
	if !top && t.Implements(rrefIface) {
		return true
	}
	if seen[t] {
		return false
	}
	seen[t] = true
	switch t.Kind() {
	case reflect.Pointer:
		if t.Implements(rrefIface) {
			return false // the top-level RRef itself: the whole-value path
		}
		return searchType(t.Elem(), seen, false)
	case reflect.Slice, reflect.Array, reflect.Map:
		return searchType(t.Elem(), seen, false)
	case reflect.Struct:
		for i := 0; i < t.NumField(); i++ {
			if f := t.Field(i); f.IsExported() && searchType(f.Type, seen, false) {
				return true
			}
		}
	}
	return false
}

// walkRRefs calls f for every non-nil RRef found in v.
func walkRRefs(v reflect.Value, f func(rrefArg) error) error {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			return nil
		}
		if ra, ok := v.Interface().(rrefArg); ok {
			return f(ra)
		}
		return walkRRefs(v.Elem(), f)
	case reflect.Slice, reflect.Array:
		for i := 0; i < v.Len(); i++ {
			if err := walkRRefs(v.Index(i), f); err != nil {
				return err
			}
		}
	case reflect.Map:
		it := v.MapRange()
		for it.Next() {
			if err := walkRRefs(it.Value(), f); err != nil {
				return err
			}
		}
	case reflect.Struct:
		t := v.Type()
		for i := 0; i < v.NumField(); i++ {
			if t.Field(i).IsExported() {
				if err := walkRRefs(v.Field(i), f); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// encodeNested encodes a value holding RRefs: the handles, then the value.
func encodeNested(w *Worker, v reflect.Value) ([]byte, []core.HandleID, error) {
	var refs []core.HandleID
	seen := map[core.HandleID]bool{}
	err := walkRRefs(v, func(ra rrefArg) error {
		ow, h := ra.handle()
		if ow == nil {
			return ErrUnbound
		}
		if ow != w {
			return fmt.Errorf("worker: an RRef of worker %s passed through worker %s", ow.name, w.name)
		}
		if seen[h] {
			// Each RRef value is one reference: two places would share (and
			// release) one handle. Clone it for the second place.
			return fmt.Errorf("worker: one RRef appears twice in a value passed through %s; Clone it for the second place", w.name)
		}
		seen[h] = true
		refs = append(refs, h)
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	b := genrt.AppendUvarint(nil, uint64(len(refs)))
	for _, h := range refs {
		b = genrt.AppendUvarint(b, uint64(h))
	}
	body, err := w.cfg.Codec.Marshal(v.Interface())
	if err != nil {
		return nil, nil, err
	}
	return append(b, body...), refs, nil
}

// decodeNested decodes into ptr a value encodeNested made, binding its
// RRefs to hs, the handles the core made for them, in the same order.
func decodeNested(w *Worker, b []byte, hs []core.HandleID, ptr reflect.Value) error {
	n, k, err := genrt.ConsumeUvarint(b)
	if err != nil || n != uint64(len(hs)) {
		return fmt.Errorf("%w: a value with RRefs names %d of them, %d arrived", ErrCodec, n, len(hs))
	}
	b = b[k:]
	local := make(map[uint64]core.HandleID, n)
	for i := range hs {
		sent, k, err := genrt.ConsumeUvarint(b)
		if err != nil {
			return fmt.Errorf("%w: truncated RRef list", ErrCodec)
		}
		b = b[k:]
		local[sent] = hs[i]
	}
	if err := w.cfg.Codec.Unmarshal(b, ptr.Interface()); err != nil {
		return err
	}
	bound := map[core.HandleID]bool{}
	return walkRRefs(ptr.Elem(), func(ra rrefArg) error {
		nb := ra.(nestedRRef)
		h, ok := local[nb.wireHandle()]
		if !ok || bound[h] {
			return fmt.Errorf("%w: an RRef in the value was not sent with it, or twice", ErrCodec)
		}
		bound[h] = true
		nb.bindInPlace(w, h)
		return nil
	})
}

// nestedRRef is what decodeNested needs of an RRef.
type nestedRRef interface {
	wireHandle() uint64
	bindInPlace(w *Worker, h core.HandleID)
}

func (r *RRef[T]) wireHandle() uint64 { return r.wire }

// bindInPlace makes r (new, or decoded from the wire) a live RRef for
// handle h, with a cleanup that releases it if the program drops it.
func (r *RRef[T]) bindInPlace(w *Worker, h core.HandleID) { r.bindAt(w, h, 0) }

// bindAt is bindInPlace for an RRef made at site (0: unknown), noted
// with its type while the worker records reference sites (refs.go).
func (r *RRef[T]) bindAt(w *Worker, h core.HandleID, site uintptr) {
	w.mu.Lock()
	st := w.c.Handle(h)
	if w.recordSites.Load() {
		w.noteRef(h, refNote{site: site, born: time.Since(monoEpoch), typ: reflect.TypeFor[T]()})
	}
	w.mu.Unlock()
	r.w, r.h, r.owner, r.state = w, h, st.Owner, &releaseState{w: w, h: h}
	runtime.AddCleanup(r, (*releaseState).collected, r.state)
}

// GobEncode encodes the RRef, inside a value passed to or returned from a
// call, as its handle on the sending worker; see Register.
func (r *RRef[T]) GobEncode() ([]byte, error) { return genrt.AppendUvarint(nil, uint64(r.h)), nil }

// GobDecode reads what GobEncode wrote; the runtime then binds the RRef.
func (r *RRef[T]) GobDecode(b []byte) error {
	v, n, err := genrt.ConsumeUvarint(b)
	if err != nil || n != len(b) {
		return fmt.Errorf("%w: bad RRef encoding", ErrCodec)
	}
	r.wire = v
	return nil
}

// MarshalJSON encodes the RRef as its handle number on the sending worker.
func (r *RRef[T]) MarshalJSON() ([]byte, error) { return strconv.AppendUint(nil, uint64(r.h), 10), nil }

// UnmarshalJSON reads what MarshalJSON wrote; the runtime then binds the RRef.
func (r *RRef[T]) UnmarshalJSON(b []byte) error {
	return json.Unmarshal(b, &r.wire)
}
