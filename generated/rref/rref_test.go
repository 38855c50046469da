// The tests rrefgen writes for every spec are in generated_test.go; these
// are the RRef protocol's own, and the check that this folder is fresh.
package rref_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/rrefkit/rref/gen"
	"github.com/rrefkit/rref/generated/rref"
	"github.com/rrefkit/rref/genrt"
	"github.com/rrefkit/rref/spec"
)

// TestNotStale fails when generated/rref differs from what rrefgen would write now.
func TestNotStale(t *testing.T) {
	p, err := spec.RRef()
	if err != nil {
		t.Fatal(err)
	}
	files, err := gen.Generate(p, "github.com/rrefkit/rref/generated/rref")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		have, err := os.ReadFile(filepath.FromSlash(f.Name))
		if err != nil || !bytes.Equal(have, f.Content) {
			t.Errorf("generated/rref/%s is stale: run go generate ./generated (or rrefgen gen)", f.Name)
		}
	}
}

// TestDecodeErrors: each malformed frame of the RRef protocol is refused
// with its own error (the generated tests check every message's round
// trip, prefixes and trailing bytes; these are the protocol's own cases).
func TestDecodeErrors(t *testing.T) {
	good := rref.AppendFrame(nil, &rref.UserDelete{RRef: rref.RRefID{Worker: 1, Local: 2}, Fork: rref.ForkID{Worker: 1, Local: 3}})
	cases := []struct {
		name  string
		frame []byte
		want  error
	}{
		{"empty", nil, genrt.ErrEmpty},
		{"version", append([]byte{9}, good[1:]...), genrt.ErrVersion},
		{"unknown code", []byte{rref.FrameVersion, 99}, genrt.ErrUnknownCode},
		{"truncated", good[:len(good)-1], genrt.ErrTruncated},
		{"overlong varint", []byte{rref.FrameVersion, byte(rref.CodeUserDelete), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, genrt.ErrOverflow},
		{"worker over u32", []byte{rref.FrameVersion, byte(rref.CodeUserDelete), 0x80, 0x80, 0x80, 0x80, 0x10, 0, 0, 0}, genrt.ErrOverflow},
		{"bad bool", rref.AppendFrame(nil, &rref.ForkAck{})[:len(rref.AppendFrame(nil, &rref.ForkAck{}))-1], genrt.ErrTruncated},
		{"bool 2", append(rref.AppendFrame(nil, &rref.ForkAck{})[:len(rref.AppendFrame(nil, &rref.ForkAck{}))-1], 2), genrt.ErrBadBool},
		{"bad enum", []byte{rref.FrameVersion, byte(rref.CodeError), 42, 0, 0}, genrt.ErrBadEnum},
		{"string past end", []byte{rref.FrameVersion, byte(rref.CodeError), 0, 0, 50, 'x'}, genrt.ErrTruncated},
		{"list count past end", []byte{rref.FrameVersion, byte(rref.CodeCall), 0, 0, 0, 100}, genrt.ErrTruncated},
	}
	for _, tc := range cases {
		_, err := rref.Decode(tc.frame, nil)
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, err, tc.want)
		}
	}
	var de *genrt.DecodeError
	_, err := rref.Decode([]byte{rref.FrameVersion, byte(rref.CodeError), 0, 0, 50, 'x'}, nil)
	if !errors.As(err, &de) || de.Message != "Error" || de.Field != "message" {
		t.Errorf("decode error lacks context: %#v", err)
	}
	lim := genrt.Limits{MaxFrame: 1 << 10, MaxBytes: 4, MaxList: 2}
	big := rref.AppendFrame(nil, &rref.Error{Message: "too long for the limit"})
	if _, err := rref.Decode(big, &lim); !errors.Is(err, genrt.ErrTooLarge) {
		t.Errorf("MaxBytes: %v", err)
	}
	many := rref.AppendFrame(nil, &rref.Call{RRefs: make([]rref.RRefDesc, 3)})
	if _, err := rref.Decode(many, &lim); !errors.Is(err, genrt.ErrTooLarge) {
		t.Errorf("MaxList: %v", err)
	}
	huge := rref.AppendFrame(nil, &rref.Call{Args: make([]byte, 2<<10)})
	if _, err := rref.Decode(huge, &lim); !errors.Is(err, genrt.ErrTooLarge) {
		t.Errorf("MaxFrame: %v", err)
	}
}

func controlSamples() []rref.Message {
	id := rref.RRefID{Worker: 3, Local: 1 << 20}
	fork := rref.ForkID{Worker: 5, Local: 1 << 21}
	return []rref.Message{
		&rref.RemoteRet{RRef: id, Fork: fork},
		&rref.FetchCall{FetchID: 77, RRef: id, Fork: fork},
		&rref.ForkRequest{RRef: id, Fork: fork, Parent: fork},
		&rref.ForkAck{RRef: id, Fork: fork},
		&rref.ChildAccept{RRef: id, Child: fork},
		&rref.UserDelete{RRef: id, Fork: fork},
	}
}

func BenchmarkControl(b *testing.B) {
	for _, m := range controlSamples() {
		frame := rref.AppendFrame(nil, m)
		b.Run("Append/"+m.MessageCode().String(), func(b *testing.B) {
			b.ReportAllocs()
			buf := make([]byte, 0, 64)
			for i := 0; i < b.N; i++ {
				buf = rref.AppendFrame(buf[:0], m)
			}
			b.SetBytes(int64(len(frame)))
		})
		b.Run("Decode/"+m.MessageCode().String(), func(b *testing.B) {
			b.ReportAllocs()
			var d rref.Decoder
			for i := 0; i < b.N; i++ {
				if _, err := d.Decode(frame); err != nil {
					b.Fatal(err)
				}
			}
			b.SetBytes(int64(len(frame)))
		})
	}
}

// TestDecoderSeesLimitsChange: a Decoder resolves its Limits once and keeps
// them, so a change between two frames must still apply, every field, and
// back to the defaults.
func TestDecoderSeesLimitsChange(t *testing.T) {
	var d rref.Decoder
	frame := rref.AppendFrame(nil, &rref.Call{Function: "fn", Args: make([]byte, 100), RRefs: make([]rref.RRefDesc, 3)})
	steps := []struct {
		what string
		lim  genrt.Limits
		want error
	}{
		{"zero: the defaults", genrt.Limits{}, nil},
		{"MaxFrame", genrt.Limits{MaxFrame: 10, MaxBytes: 1 << 10, MaxList: 10}, genrt.ErrTooLarge},
		{"MaxBytes", genrt.Limits{MaxFrame: 1 << 10, MaxBytes: 10, MaxList: 10}, genrt.ErrTooLarge},
		{"MaxList", genrt.Limits{MaxFrame: 1 << 10, MaxBytes: 1 << 10, MaxList: 2}, genrt.ErrTooLarge},
		{"all roomy", genrt.Limits{MaxFrame: 1 << 10, MaxBytes: 1 << 10, MaxList: 10}, nil},
		{"zero again", genrt.Limits{}, nil},
		{"MaxFrame again", genrt.Limits{MaxFrame: 10, MaxBytes: 1 << 10, MaxList: 10}, genrt.ErrTooLarge},
	}
	for _, s := range steps {
		d.Limits = s.lim
		for range 2 { // the second decode reads the limits the first resolved
			if _, err := d.Decode(frame); !errors.Is(err, s.want) {
				t.Fatalf("%s: got %v, want %v", s.what, err, s.want)
			}
		}
	}
}

// TestDecoderSeesDefaultLimitsChange: a Decoder with no limits of its own
// applies DefaultLimits as they are at each frame, as Decode(b, nil) does,
// though it keeps what it resolved between frames.
func TestDecoderSeesDefaultLimitsChange(t *testing.T) {
	saved := genrt.DefaultLimits
	defer func() { genrt.DefaultLimits = saved }()
	var d rref.Decoder
	frame := rref.AppendFrame(nil, &rref.Call{Function: "fn", Args: make([]byte, 100)})
	if _, err := d.Decode(frame); err != nil {
		t.Fatal(err)
	}
	genrt.DefaultLimits.MaxBytes = 10
	if _, err := rref.Decode(frame, nil); !errors.Is(err, genrt.ErrTooLarge) {
		t.Fatalf("Decode under the lowered defaults: %v", err)
	}
	if _, err := d.Decode(frame); !errors.Is(err, genrt.ErrTooLarge) {
		t.Fatalf("a Decoder kept the defaults it saw first: %v", err)
	}
	genrt.DefaultLimits = saved
	if _, err := d.Decode(frame); err != nil {
		t.Fatalf("defaults restored: %v", err)
	}
}

// TestCopiedDecoderInternsAlone: a copy of a Decoder that has decoded
// interns into its own table, not its original's (which another goroutine
// may be using).
func TestCopiedDecoderInternsAlone(t *testing.T) {
	var d rref.Decoder
	frame := rref.AppendFrame(nil, &rref.Call{Function: "first"})
	if _, err := d.Decode(frame); err != nil {
		t.Fatal(err)
	}
	e := d
	var wg sync.WaitGroup
	start := make(chan struct{})
	for _, dec := range []*rref.Decoder{&d, &e} {
		wg.Add(1)
		go func() { // the race detector reports a shared table
			defer wg.Done()
			<-start
			for i := range 5000 {
				f := rref.AppendFrame(nil, &rref.Call{Function: fmt.Sprintf("fn%d", i%7)})
				if _, err := dec.Decode(f); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	close(start)
	wg.Wait()
}
