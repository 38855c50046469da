package genrt

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"testing"
)

// referenceUvarint is the byte-at-a-time reading ConsumeUvarint must agree
// with: canonical (no trailing zero group), at most ten bytes, the tenth at
// most 1.
func referenceUvarint(b []byte) (uint64, int, error) {
	var v uint64
	for i := 0; i < len(b) && i < 10; i++ {
		c := b[i]
		if i == 9 && c > 1 {
			return 0, 0, ErrOverflow
		}
		v |= uint64(c&0x7f) << (7 * i)
		if c < 0x80 {
			if c == 0 && i > 0 {
				return 0, 0, ErrNonCanonical
			}
			return v, i + 1, nil
		}
	}
	if len(b) >= 10 {
		return 0, 0, ErrOverflow
	}
	return 0, 0, ErrTruncated
}

func checkUvarint(t *testing.T, b []byte) {
	t.Helper()
	v, n, err := ConsumeUvarint(b)
	rv, rn, rerr := referenceUvarint(b)
	if v != rv || n != rn || !errors.Is(err, rerr) || (err == nil) != (rerr == nil) {
		t.Fatalf("% x: got %d %d %v, want %d %d %v", b, v, n, err, rv, rn, rerr)
	}
}

// TestUvarintEveryLengthAndEdge: every value at the edges of each length,
// with and without bytes after it, and cut short; the tenth byte's limit;
// non-canonical spellings of every length.
func TestUvarintEveryLengthAndEdge(t *testing.T) {
	var values []uint64
	for bit := range 64 {
		for _, d := range []int64{-1, 0, 1} {
			values = append(values, uint64(int64(1)<<bit+d))
		}
	}
	values = append(values, 0, math.MaxUint64, math.MaxUint64-1, 0x8080808080808080, 0x7f7f7f7f7f7f7f7f)
	for _, v := range values {
		enc := binary.AppendUvarint(nil, v)
		for _, tail := range [][]byte{nil, {0}, {0xff}, bytes.Repeat([]byte{0x80}, 12)} {
			b := append(bytes.Clone(enc), tail...)
			got, n, err := ConsumeUvarint(b)
			if err != nil || got != v || n != len(enc) {
				t.Fatalf("%d (% x) then % x: got %d %d %v", v, enc, tail, got, n, err)
			}
			checkUvarint(t, b)
		}
		for cut := range len(enc) {
			checkUvarint(t, enc[:cut])
		}
	}
	for n := 2; n <= 10; n++ { // a zero last group, padded to every length
		b := append(bytes.Repeat([]byte{0x81}, n-1), 0)
		checkUvarint(t, b)
		checkUvarint(t, append(b, 1, 2, 3, 4, 5, 6, 7, 8))
	}
	for last := range 256 { // the tenth byte, and an eleventh
		b := append(bytes.Repeat([]byte{0xff}, 9), byte(last), 1)
		checkUvarint(t, b)
		checkUvarint(t, b[:10])
	}
}

// FuzzUvarint: any bytes read alike by the word-at-a-time reader and the
// byte-at-a-time reference.
func FuzzUvarint(f *testing.F) {
	f.Add([]byte{0x80, 0x01})
	f.Add(binary.AppendUvarint(nil, math.MaxUint64))
	f.Add(append(bytes.Repeat([]byte{0xff}, 9), 2))
	f.Add([]byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00, 0x55})
	f.Fuzz(func(t *testing.T, b []byte) { checkUvarint(t, b) })
}

func BenchmarkConsumeUvarint(b *testing.B) {
	for _, v := range []uint64{300, 1 << 40, 0xdeadbeefcafef00d} {
		buf := binary.AppendUvarint(nil, v)
		buf = append(buf, make([]byte, 8)...)
		b.Run(fmt.Sprintf("%dbytes", len(binary.AppendUvarint(nil, v))), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := ConsumeUvarint(buf); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
