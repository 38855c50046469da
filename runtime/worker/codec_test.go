package worker

import (
	"errors"
	"reflect"
	"testing"
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
