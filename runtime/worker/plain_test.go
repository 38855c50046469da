package worker

import (
	"bytes"
	"encoding/binary"
	"math"
	"reflect"
	"testing"

	"pgregory.net/rapid"
)

type vec3 struct{ X, Y, Z float32 }

type sample struct {
	At    int64
	Pos   vec3
	Flags [2]uint16
	Gain  complex64
}

type padded struct {
	A int8
	B int64
}

type withBool struct {
	On bool
	N  int32
}

type withBlank struct {
	N int32
	_ int32
}

// The copied bytes are exactly what encoding/binary writes, so both paths
// read each other; types that are not plain keep the reflective path.
func TestPlainLayoutMatchesEncodingBinary(t *testing.T) {
	for _, tc := range []struct {
		v     any
		plain bool
	}{
		{[2]int64{1, -2}, true},
		{vec3{1, -2.5, float32(math.Inf(1))}, true},
		{sample{At: -9, Pos: vec3{1, 2, 3}, Flags: [2]uint16{7, 65535}, Gain: complex(1, -1)}, true},
		{[3]sample{{At: 1}, {At: 2}, {At: 3}}, true},
		{padded{1, 2}, false},
		{withBool{true, 3}, false},
		{withBlank{N: 4}, false},
	} {
		typ := reflect.TypeOf(tc.v)
		if got := plainSize(typ) > 0; got != tc.plain {
			t.Errorf("%T: plain %v, want %v", tc.v, got, tc.plain)
		}
		b, err := Fast.Marshal(tc.v)
		if err != nil {
			t.Fatalf("%T: %v", tc.v, err)
		}
		if want, _ := binary.Append(nil, binary.LittleEndian, tc.v); !bytes.Equal(b, want) {
			t.Errorf("%T: % x, encoding/binary writes % x", tc.v, b, want)
		}
		back := reflect.New(typ)
		if err := Fast.Unmarshal(b, back.Interface()); err != nil {
			t.Fatalf("%T: %v", tc.v, err)
		}
		if !reflect.DeepEqual(back.Elem().Interface(), tc.v) {
			t.Errorf("%T: %v came back as %v", tc.v, tc.v, back.Elem().Interface())
		}
	}
}

// Random slices of a plain struct round-trip through the copy path and
// match encoding/binary byte for byte; a truncated or extended encoding is
// refused.
func TestPlainSlicesRoundTrip(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		n := rapid.IntRange(0, 50).Draw(rt, "n")
		in := make([]sample, n)
		for i := range in {
			in[i] = sample{At: rapid.Int64().Draw(rt, "at"), Pos: vec3{X: rapid.Float32().Draw(rt, "x")},
				Flags: [2]uint16{rapid.Uint16().Draw(rt, "f")}}
		}
		b, err := Fast.Marshal(in)
		if err != nil {
			rt.Fatal(err)
		}
		want, _ := binary.Append(binary.AppendUvarint(nil, uint64(n)), binary.LittleEndian, in)
		if !bytes.Equal(b, want) {
			rt.Fatalf("% x, want % x", b, want)
		}
		var out []sample
		if err := Fast.Unmarshal(b, &out); err != nil || len(out) != n {
			rt.Fatalf("%d samples back, %v", len(out), err)
		}
		for i := range in {
			if in[i] != out[i] && !(in[i].Pos.X != in[i].Pos.X) { // NaN != NaN
				rt.Fatalf("sample %d: %+v came back as %+v", i, in[i], out[i])
			}
		}
		if n > 0 {
			if err := Fast.Unmarshal(b[:len(b)-1], &out); err == nil {
				rt.Fatal("a truncated encoding was accepted")
			}
		}
		if err := Fast.Unmarshal(append(b, 0), &out); err == nil {
			rt.Fatal("an encoding with a trailing byte was accepted")
		}
	})
}

// BenchmarkFastCodecSamples shows the copy path against encoding/binary's
// reflection for 10,000 plain structs.
func BenchmarkFastCodecSamples(b *testing.B) {
	in := make([]sample, 10000)
	b.Run("fast", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			p, _ := Fast.Marshal(in)
			var out []sample
			Fast.Unmarshal(p, &out)
		}
	})
	b.Run("encoding-binary", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			p, _ := binary.Append(nil, binary.LittleEndian, in)
			out := make([]sample, len(in))
			binary.Decode(p, binary.LittleEndian, out)
		}
	})
}
