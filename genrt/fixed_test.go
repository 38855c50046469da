package genrt

import (
	"errors"
	"math"
	"testing"
)

// TestFixed64EdgesAndTruncation: the ends of the range and a value with
// every byte different round-trip in exactly eight bytes, little-endian,
// leaving what follows; seven bytes or fewer are truncated, never read
// past.
func TestFixed64EdgesAndTruncation(t *testing.T) {
	for _, v := range []uint64{0, 1, 0x0102030405060708, math.MaxUint64 - 1, math.MaxUint64} {
		b := AppendFixed64([]byte{0xaa}, v)
		if len(b) != 9 || b[0] != 0xaa || b[1] != byte(v) || b[8] != byte(v>>56) {
			t.Fatalf("%#x encodes as % x", v, b)
		}
		b = append(b, 0x55) // a byte after it, left alone
		got, n, err := ConsumeFixed64(b[1:])
		if err != nil || got != v || n != 8 {
			t.Fatalf("%#x: got %#x %d %v", v, got, n, err)
		}
		for cut := range 8 {
			if _, n, err := ConsumeFixed64(b[1 : 1+cut]); !errors.Is(err, ErrTruncated) || n != 0 {
				t.Fatalf("%#x cut to %d bytes: %d, %v", v, cut, n, err)
			}
		}
	}
}

func FuzzFixed64(f *testing.F) {
	f.Add([]byte{1, 2, 3, 4, 5, 6, 7, 8, 9})
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, b []byte) {
		v, n, err := ConsumeFixed64(b)
		if len(b) < 8 {
			if !errors.Is(err, ErrTruncated) || n != 0 {
				t.Fatalf("% x: %d %v, want truncated", b, n, err)
			}
			return
		}
		if err != nil || n != 8 || string(AppendFixed64(nil, v)) != string(b[:8]) {
			t.Fatalf("% x: %#x %d %v", b, v, n, err)
		}
	})
}
