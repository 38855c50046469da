package worker

import (
	"bytes"
	"context"
	"errors"
	"reflect"
	"testing"

	"pgregory.net/rapid"
)

type point struct {
	X, Y float64
	N    int32
}

type named struct {
	Name string
	Tags []string
}

func roundTrip[T any](t *testing.T, c Codec, v T) {
	t.Helper()
	b, err := c.Marshal(v)
	if err != nil {
		t.Fatalf("%T: %v", v, err)
	}
	var got T
	if err := c.Unmarshal(b, &got); err != nil {
		t.Fatalf("%T: %v", v, err)
	}
	if !reflect.DeepEqual(got, v) {
		t.Fatalf("%T: got %v, want %v", v, got, v)
	}
}

func TestCodecsRoundTrip(t *testing.T) {
	for _, c := range []Codec{Fast, Gob, JSON} {
		roundTrip(t, c, 42)
		roundTrip(t, c, int64(-7))
		roundTrip(t, c, "héllo")
		roundTrip(t, c, true)
		roundTrip(t, c, 2.5)
		roundTrip(t, c, [2]int64{1, -2})
		roundTrip(t, c, []float64{1, 2, 3})
		roundTrip(t, c, point{1, 2, 3})
		roundTrip(t, c, []point{{1, 2, 3}, {4, 5, 6}})
		roundTrip(t, c, named{"a", []string{"x", "y"}})
	}
	roundTrip(t, Fast, []byte{1, 2, 3})
	roundTrip(t, Fast, uint32(7))
	roundTrip(t, Fast, float32(1.5))
}

func TestFastCodecRejectsBadInput(t *testing.T) {
	var i int
	var f []float64
	var p [2]int64
	var b bool
	for _, tc := range []struct {
		data []byte
		into any
	}{
		{[]byte{0x80}, &i}, {[]byte{5, 0}, &f}, {[]byte{1, 2, 3}, &p}, {[]byte{2}, &b}, {[]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, &f},
	} {
		if err := Fast.Unmarshal(tc.data, tc.into); !errors.Is(err, ErrCodec) {
			t.Errorf("%x into %T: %v", tc.data, tc.into, err)
		}
	}
	if err := Fast.Unmarshal([]byte{1}, p); !errors.Is(err, ErrCodec) {
		t.Errorf("non-pointer: %v", err)
	}
}

type userID int64 // a named type: laid out as a plain value, not a varint

// typedMatchesBoxed checks that a call's arguments, encoded where they are
// (encodeArg) rather than through the Codec interface, give Fast's bytes,
// and that both decoders agree, on v and on v's bytes cut short.
func typedMatchesBoxed[T any](t *rapid.T, w *Worker, v T) {
	boxed, err := Fast.Marshal(v)
	if err != nil {
		t.Fatalf("%T: %v", v, err)
	}
	typed, hs, err := encodeArg(w, v)
	if err != nil || hs != nil {
		t.Fatalf("%T: %v %v", v, hs, err)
	}
	if !bytes.Equal(typed, boxed) {
		t.Fatalf("%T %v: encodeArg % x, Marshal % x", v, v, typed, boxed)
	}
	for _, data := range [][]byte{boxed, boxed[:len(boxed)/2]} {
		got, err := decodeArg[T](w, data, nil)
		var want T
		werr := Fast.Unmarshal(data, &want)
		if (err == nil) != (werr == nil) || (err != nil && !errors.Is(err, ErrCodec)) {
			t.Fatalf("%T from % x: decodeArg %v, Unmarshal %v", v, data, err, werr)
		}
		if err == nil && !reflect.DeepEqual(got, want) {
			t.Fatalf("%T from % x: decodeArg %v, Unmarshal %v", v, data, got, want)
		}
	}
}

func TestTypedArgumentsMatchTheCodec(t *testing.T) {
	w := &Worker{cfg: Config{Codec: Fast}}
	rapid.Check(t, func(t *rapid.T) {
		typedMatchesBoxed(t, w, rapid.Int64().Draw(t, "i64"))
		typedMatchesBoxed(t, w, rapid.Int().Draw(t, "int"))
		typedMatchesBoxed(t, w, rapid.Int32().Draw(t, "i32"))
		typedMatchesBoxed(t, w, rapid.Uint64().Draw(t, "u64"))
		typedMatchesBoxed(t, w, rapid.Uint32().Draw(t, "u32"))
		typedMatchesBoxed(t, w, rapid.Float64().Draw(t, "f64"))
		typedMatchesBoxed(t, w, rapid.Float32().Draw(t, "f32"))
		typedMatchesBoxed(t, w, rapid.Bool().Draw(t, "bool"))
		typedMatchesBoxed(t, w, rapid.String().Draw(t, "string"))
		typedMatchesBoxed(t, w, userID(rapid.Int64().Draw(t, "named")))
		typedMatchesBoxed(t, w, [2]int64{rapid.Int64().Draw(t, "a0"), rapid.Int64().Draw(t, "a1")})
		typedMatchesBoxed(t, w, rapid.SliceOf(rapid.Float64()).Draw(t, "floats"))
		typedMatchesBoxed(t, w, point{X: rapid.Float64().Draw(t, "x"), N: rapid.Int32().Draw(t, "n")})
		typedMatchesBoxed(t, w, named{Name: rapid.String().Draw(t, "name")})
	})
}

// fuzzType decodes data as a T both ways (typed, as calls do, and through
// the Codec interface): they must agree, never panic, and a value that
// decodes must encode to bytes that decode to it again.
func fuzzType[T any](t *testing.T, w *Worker, data []byte) {
	got, err := decodeArg[T](w, data, nil)
	var boxed T
	berr := Fast.Unmarshal(data, &boxed)
	if (err == nil) != (berr == nil) {
		t.Fatalf("%T from % x: typed %v, boxed %v", got, data, err, berr)
	}
	if err != nil {
		if !errors.Is(err, ErrCodec) {
			t.Fatalf("%T from % x: %v is not an ErrCodec", got, data, err)
		}
		return
	}
	if !reflect.DeepEqual(got, boxed) && !bytes.Equal(mustMarshal(t, got), mustMarshal(t, boxed)) {
		t.Fatalf("%T from % x: typed %v, boxed %v", got, data, got, boxed)
	}
	again, err := decodeArg[T](w, mustMarshal(t, got), nil)
	if err != nil || !bytes.Equal(mustMarshal(t, again), mustMarshal(t, got)) {
		t.Fatalf("%T from % x: %v does not survive a round trip (%v, %v)", got, data, got, again, err)
	}
}

func mustMarshal(t *testing.T, v any) []byte {
	b, err := Fast.Marshal(v)
	if err != nil {
		t.Fatalf("%T: %v", v, err)
	}
	return b
}

// FuzzFastDecode feeds arbitrary bytes, as a peer could send them, to the
// Fast codec's decoders for the types it lays out itself.
func FuzzFastDecode(f *testing.F) {
	for _, seed := range [][]byte{nil, {0}, {1}, {0x80}, {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01},
		{2, 1, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0}, []byte("héllo")} {
		f.Add(seed)
	}
	w := &Worker{cfg: Config{Codec: Fast}}
	f.Fuzz(func(t *testing.T, data []byte) {
		fuzzType[int64](t, w, data)
		fuzzType[int](t, w, data)
		fuzzType[int32](t, w, data)
		fuzzType[uint32](t, w, data)
		fuzzType[uint64](t, w, data)
		fuzzType[float64](t, w, data)
		fuzzType[float32](t, w, data)
		fuzzType[bool](t, w, data)
		fuzzType[string](t, w, data)
		fuzzType[[]byte](t, w, data)
		fuzzType[userID](t, w, data)
		fuzzType[[2]int64](t, w, data)
		fuzzType[point](t, w, data)
		fuzzType[[]float64](t, w, data)
		fuzzType[[]sample](t, w, data)
	})
}

// uncomparableCodec is JSON behind a type == cannot compare (a slice).
type uncomparableCodec []string

func (uncomparableCodec) Marshal(v any) ([]byte, error)      { return JSON.Marshal(v) }
func (uncomparableCodec) Unmarshal(data []byte, v any) error { return JSON.Unmarshal(data, v) }

// TestUncomparableCodec: a codec of an uncomparable type works, and
// reassigning the variable Fast changes nothing for workers made before.
func TestUncomparableCodec(t *testing.T) {
	saved := Fast
	Fast = uncomparableCodec{"wrapped"}
	defer func() { Fast = saved }()
	fast, err := NewGroup([]string{"A", "B"}, Config{Logger: quiet, Codec: saved,
		Setup: func(w *Worker) {
			Register(w, "add", func(ctx context.Context, x [2]int) (int, error) { return x[0] + x[1], nil })
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer ShutdownGroup(context.Background(), fast)
	if !fast[0].fastCodec() {
		t.Fatal("a worker with the Fast codec does not know it once the variable is reassigned")
	}
	if sum, err := Call[int](context.Background(), fast[0], "B", "add", [2]int{2, 3}); err != nil || sum != 5 {
		t.Fatalf("call with Fast reassigned: %v %v", sum, err)
	}
	ws, err := NewGroup([]string{"A", "B"}, Config{Logger: quiet, Codec: uncomparableCodec{"x"},
		Setup: func(w *Worker) {
			Register(w, "add", func(ctx context.Context, x [2]int) (int, error) { return x[0] + x[1], nil })
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer ShutdownGroup(context.Background(), ws)
	if sum, err := Call[int](context.Background(), ws[0], "B", "add", [2]int{2, 3}); err != nil || sum != 5 {
		t.Fatalf("call: %v %v", sum, err)
	}
	r, err := NewRRef(ws[0], "v")
	if err != nil {
		t.Fatal(err)
	}
	if v, err := r.ToHere(context.Background()); err != nil || v != "v" {
		t.Fatalf("value: %q %v", v, err)
	}
	r.Release()
}
