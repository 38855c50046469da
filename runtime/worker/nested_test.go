package worker

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/rrefkit/rref/runtime/core"
)

type job struct {
	Name    string
	Weights *RRef[int]
	Extra   []*RRef[int]
	ByKey   map[string]*RRef[int]
	Skip    *RRef[int] // nil: stays nil
}

type jobResult struct {
	Sum   int
	Saved *RRef[int] // made by the callee, owned by it
}

// RRefs inside a struct, a slice and a map travel with the value, arrive
// bound and confirmed, are released when the function returns, and RRefs
// inside a result are the caller's; nothing leaks (checked by shutdown).
func TestNestedRRefs(t *testing.T) {
	for _, codec := range []struct {
		name string
		c    Codec
	}{{"fast", Fast}, {"gob", Gob}, {"json", JSON}} {
		t.Run(codec.name, func(t *testing.T) {
			ws, err := NewGroup([]string{"A", "B", "C"}, Config{Logger: quiet, Codec: codec.c, CallTimeout: 10 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			defer shutdown(t, ws)
			a, b, c := ws[0], ws[1], ws[2]
			Register(b, "make", func(ctx context.Context, v int) (*RRef[int], error) { return NewRRef(b, v) })
			Register(c, "run", func(ctx context.Context, j job) (jobResult, error) {
				if j.Skip != nil {
					return jobResult{}, errors.New("nil RRef arrived non-nil")
				}
				sum := 0
				all := append([]*RRef[int]{j.Weights}, j.Extra...)
				for _, r := range j.ByKey {
					all = append(all, r)
				}
				for _, r := range all {
					v, err := r.ToHere(ctx)
					if err != nil {
						return jobResult{}, err
					}
					sum += v
				}
				saved, err := NewRRef(c, sum*10)
				return jobResult{Sum: sum, Saved: saved}, err
			})
			ctx := ctxT(t)
			mk := func(v int) *RRef[int] {
				r, err := Call[*RRef[int]](ctx, a, "B", "make", v)
				if err != nil {
					t.Fatal(err)
				}
				return r
			}
			j := job{Name: "j", Weights: mk(1), Extra: []*RRef[int]{mk(2), mk(3)}, ByKey: map[string]*RRef[int]{"x": mk(4)}}
			res, err := Call[jobResult](ctx, a, "C", "run", j)
			if err != nil || res.Sum != 10 {
				t.Fatalf("run = %+v, %v", res, err)
			}
			if res.Saved == nil || res.Saved.Owner() != "C" {
				t.Fatalf("returned RRef %+v", res.Saved)
			}
			if v, err := res.Saved.ToHere(ctx); err != nil || v != 100 {
				t.Fatalf("returned RRef holds %d, %v", v, err)
			}
			for _, r := range append([]*RRef[int]{j.Weights, j.ByKey["x"], res.Saved}, j.Extra...) {
				r.Release()
			}
		})
	}
}

// One RRef in two places of a value is refused: two places would share
// one reference.
func TestNestedRRefTwiceRefused(t *testing.T) {
	ws := group(t, "A", "B")
	defer shutdown(t, ws)
	Register(ws[1], "run", func(ctx context.Context, j job) (int, error) { return 0, nil })
	r, err := NewRRef(ws[0], 5)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Release()
	_, err = Call[int](ctxT(t), ws[0], "B", "run", job{Weights: r, Extra: []*RRef[int]{r}})
	if err == nil || !strings.Contains(err.Error(), "appears twice") {
		t.Fatalf("one RRef twice: %v", err)
	}
}

// The value an RRef refers to is bytes on its owner: it cannot hold RRefs.
func TestRRefValueCannotHoldRRefs(t *testing.T) {
	ws := group(t, "A", "B")
	defer shutdown(t, ws)
	if _, err := NewRRef(ws[0], job{}); !errors.Is(err, ErrRRefInValue) {
		t.Errorf("NewRRef of a value holding RRefs: %v", err)
	}
	if _, err := Remote[*RRef[int]](ctxT(t), ws[0], "B", "make", 1); !errors.Is(err, ErrRRefInValue) {
		t.Errorf("Remote whose value is an RRef: %v", err)
	}
	// A caller that types the result otherwise is refused by the callee
	// before the function runs (its types are not the function's).
	r, err := Remote[int](ctxT(t), ws[0], "B", "make", 1)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Release()
	if _, err := r.ToHere(ctxT(t)); !errors.Is(err, ErrTypeMismatch) {
		t.Errorf("Remote of a function returning an RRef: %v", err)
	}
}

// FuzzNestedDecode: no input makes the decoder of values holding RRefs
// panic, whatever the handle list claims; what it accepts binds only
// handles that arrived.
func FuzzNestedDecode(f *testing.F) {
	ws, err := NewGroup([]string{"A"}, Config{Logger: quiet})
	if err != nil {
		f.Fatal(err)
	}
	defer ws[0].Close()
	w := ws[0]
	r, _ := NewRRef(w, 3)
	good, refs, err := encodeNested(w, reflect.ValueOf(job{Name: "x", Weights: r}))
	if err != nil || len(refs) != 1 {
		f.Fatal(err)
	}
	f.Add(good, uint8(1))
	f.Add([]byte{0}, uint8(0))
	f.Add([]byte{2, 1, 1}, uint8(2))
	f.Fuzz(func(t *testing.T, b []byte, n uint8) {
		hs := make([]core.HandleID, n%4)
		for i := range hs {
			hs[i] = core.HandleID(1000 + i)
		}
		var j job
		if err := decodeNested(w, b, hs, reflect.ValueOf(&j)); err != nil {
			return
		}
		walkRRefs(reflect.ValueOf(j), func(ra rrefArg) error {
			if _, h := ra.handle(); h < 1000 || int(h) >= 1000+len(hs) {
				t.Fatalf("bound to handle %d, not one that arrived", h)
			}
			return nil
		})
	})
}

// An RRef no worker made refers to nothing: its methods say so rather than
// crash, and passing it fails.
func TestUnboundRRef(t *testing.T) {
	ws := group(t, "A", "B")
	defer shutdown(t, ws)
	var r RRef[int]
	ctx := ctxT(t)
	if _, err := r.ToHere(ctx); !errors.Is(err, ErrUnbound) {
		t.Errorf("ToHere: %v", err)
	}
	if _, err := r.Fetch(ctx).Wait(ctx); !errors.Is(err, ErrUnbound) {
		t.Errorf("Fetch: %v", err)
	}
	if _, err := r.LocalValue(ctx); !errors.Is(err, ErrUnbound) {
		t.Errorf("LocalValue: %v", err)
	}
	if _, err := r.Clone(); !errors.Is(err, ErrUnbound) {
		t.Errorf("Clone: %v", err)
	}
	if r.Owner() != "" || r.IsOwner() || r.Confirmed() || r.Release() != nil || r.Keep() != &r {
		t.Error("an unbound RRef claims an owner, confirmation or a release")
	}
	if _, err := Call[int](ctx, ws[0], "B", "fetch", &r); !errors.Is(err, ErrUnbound) {
		t.Errorf("passing an unbound RRef: %v", err)
	}
	if _, err := Call[int](ctx, ws[0], "B", "run", job{Weights: &r}); !errors.Is(err, ErrUnbound) {
		t.Errorf("passing an unbound RRef in a value: %v", err)
	}
}
