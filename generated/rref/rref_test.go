package rref_test

import (
	"bytes"
	"errors"
	"math/rand"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/google/go-cmp/cmp"

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

// newOf returns a fresh, zero message for every code.
func newOf(c rref.Code) rref.Message {
	switch c {
	case rref.CodeCall:
		return &rref.Call{}
	case rref.CodeCallRet:
		return &rref.CallRet{}
	case rref.CodeRemoteCall:
		return &rref.RemoteCall{}
	case rref.CodeRemoteRet:
		return &rref.RemoteRet{}
	case rref.CodeFetchCall:
		return &rref.FetchCall{}
	case rref.CodeFetchRet:
		return &rref.FetchRet{}
	case rref.CodeForkRequest:
		return &rref.ForkRequest{}
	case rref.CodeForkAck:
		return &rref.ForkAck{}
	case rref.CodeChildAccept:
		return &rref.ChildAccept{}
	case rref.CodeUserDelete:
		return &rref.UserDelete{}
	case rref.CodeError:
		return &rref.Error{}
	}
	return nil
}

type validator interface{ Valid() bool }

// fill sets every field of v to a random value; enums get declared values.
func fill(v reflect.Value, r *rand.Rand, depth int) {
	if v.CanAddr() {
		if _, ok := v.Addr().Interface().(validator); ok && v.Kind() == reflect.Uint8 {
			for {
				v.SetUint(uint64(r.Intn(8)))
				if v.Interface().(validator).Valid() {
					return
				}
			}
		}
	}
	switch v.Kind() {
	case reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		x := r.Uint64() >> uint(r.Intn(64))
		v.SetUint(x & (1<<(8*v.Type().Size()) - 1 | (^uint64(0))*boolToU(v.Type().Size() == 8)))
	case reflect.Int64:
		v.SetInt(int64(r.Uint64()) >> uint(r.Intn(64)))
	case reflect.Bool:
		v.SetBool(r.Intn(2) == 1)
	case reflect.String:
		b := make([]byte, r.Intn(12))
		r.Read(b)
		v.SetString(string(b))
	case reflect.Slice:
		n := r.Intn(4)
		if n == 0 || depth > 3 {
			return
		}
		if v.Type().Elem().Kind() == reflect.Uint8 {
			b := make([]byte, n*5)
			r.Read(b)
			v.SetBytes(b)
			return
		}
		s := reflect.MakeSlice(v.Type(), n, n)
		for i := 0; i < n; i++ {
			fill(s.Index(i), r, depth+1)
		}
		v.Set(s)
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			fill(v.Field(i), r, depth+1)
		}
	}
}

func boolToU(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

func TestRoundTripEveryMessage(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	var d rref.Decoder
	for _, c := range rref.Codes {
		for i := 0; i < 200; i++ {
			m := newOf(c)
			if m == nil {
				t.Fatalf("test does not know code %v", c)
			}
			fill(reflect.ValueOf(m).Elem(), r, 0)
			b := rref.AppendFrame(nil, m)
			if len(b) != rref.SizeFrame(m) {
				t.Fatalf("%v: SizeFrame %d != encoded %d", c, rref.SizeFrame(m), len(b))
			}
			got, err := rref.Decode(b, nil)
			if err != nil {
				t.Fatalf("%v: %v", c, err)
			}
			if diff := cmp.Diff(m, got); diff != "" {
				t.Fatalf("%v round trip (-want +got):\n%s", c, diff)
			}
			got2, err := d.Decode(b)
			if err != nil || !reflect.DeepEqual(got2, m) {
				t.Fatalf("%v: Decoder round trip differs: %v", c, err)
			}
			// Every strict prefix is an error, never a panic or a wrong message.
			for cut := 0; cut < len(b); cut++ {
				if _, err := rref.Decode(b[:cut], nil); err == nil {
					t.Fatalf("%v: %d-byte prefix of %d decoded", c, cut, len(b))
				}
			}
			if _, err := rref.Decode(append(b, 0), nil); !errors.Is(err, genrt.ErrTrailing) {
				t.Fatalf("%v: trailing byte: %v", c, err)
			}
		}
	}
}

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

func TestControlMessagesDoNotAllocate(t *testing.T) {
	var d rref.Decoder
	buf := make([]byte, 0, 64)
	for _, m := range controlSamples() {
		frame := rref.AppendFrame(nil, m)
		if n := testing.AllocsPerRun(100, func() { buf = rref.AppendFrame(buf[:0], m) }); n != 0 {
			t.Errorf("%v: AppendFrame allocates %.0f times", m.MessageCode(), n)
		}
		if n := testing.AllocsPerRun(100, func() {
			if _, err := d.Decode(frame); err != nil {
				t.Fatal(err)
			}
		}); n != 0 {
			t.Errorf("%v: Decoder.Decode allocates %.0f times", m.MessageCode(), n)
		}
	}
}

func TestMachinesMatchTheirTables(t *testing.T) {
	type stepper func(s, e int) (int, genrt.Outcome, error)
	machines := map[string]stepper{
		"Fork": func(s, e int) (int, genrt.Outcome, error) {
			n, o, err := rref.StepFork(rref.ForkState(s), rref.ForkEvent(e))
			return int(n), o, err
		},
		"Owner": func(s, e int) (int, genrt.Outcome, error) {
			n, o, err := rref.StepOwner(rref.OwnerState(s), rref.OwnerEvent(e))
			return int(n), o, err
		},
		"User": func(s, e int) (int, genrt.Outcome, error) {
			n, o, err := rref.StepUser(rref.UserState(s), rref.UserEvent(e))
			return int(n), o, err
		},
		"ChildPin": func(s, e int) (int, genrt.Outcome, error) {
			n, o, err := rref.StepChildPin(rref.ChildPinState(s), rref.ChildPinEvent(e))
			return int(n), o, err
		},
	}
	for _, info := range rref.Machines {
		step := machines[info.Name]
		if step == nil {
			t.Fatalf("no stepper for %s", info.Name)
		}
		index := func(names []string, n string) int {
			for i, x := range names {
				if x == n {
					return i
				}
			}
			t.Fatalf("%s: no %q", info.Name, n)
			return -1
		}
		var states, events []string
		for _, s := range info.States {
			states = append(states, s.Name)
		}
		for _, e := range info.Events {
			events = append(events, e.Name)
		}
		declared := map[[2]int]int{} // -> target index, or -1 for ignore
		for _, tr := range info.Transitions {
			to := -1
			if tr.To != "" {
				to = index(states, tr.To)
			}
			declared[[2]int{index(states, tr.From), index(events, tr.Event)}] = to
		}
		for s := range states {
			for e := range events {
				next, out, err := step(s, e)
				to, ok := declared[[2]int{s, e}]
				switch {
				case !ok:
					var te *genrt.TransitionError
					if !errors.As(err, &te) || te.Machine != info.Name || te.State != states[s] || te.Event != events[e] || next != s {
						t.Errorf("%s: (%s, %s) should be illegal, got %v %v %v", info.Name, states[s], events[e], next, out, err)
					}
				case to < 0:
					if err != nil || out != genrt.Ignored || next != s {
						t.Errorf("%s: (%s, %s) should be ignored, got %v %v %v", info.Name, states[s], events[e], next, out, err)
					}
				default:
					if err != nil || out != genrt.Moved || next != to {
						t.Errorf("%s: (%s, %s) should move to %s, got %v %v %v", info.Name, states[s], events[e], states[to], next, out, err)
					}
				}
			}
		}
		if _, _, err := step(len(states), 0); !errors.Is(err, genrt.ErrIllegalTransition) {
			t.Errorf("%s: out-of-range state accepted", info.Name)
		}
	}
	if !rref.ForkDeleted.IsFinal() || !rref.ForkKnown.IsHot() || rref.ForkStart != rref.ForkUnknown {
		t.Error("Fork flags are wrong")
	}
	if rref.UserPendingReleased.String() != "pending_released" || rref.UserOnConfirm.String() != "Confirm" {
		t.Error("String() does not use the spec's names")
	}
}

func FuzzDecode(f *testing.F) {
	for _, m := range controlSamples() {
		f.Add(rref.AppendFrame(nil, m))
	}
	f.Add(rref.AppendFrame(nil, &rref.Call{CallID: 1, Function: "f", Args: []byte("xy"), RRefs: []rref.RRefDesc{{TypeName: "int"}}}))
	f.Add(rref.AppendFrame(nil, &rref.FetchRet{Error: rref.ErrorKindUser, Message: "boom"}))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := rref.Decode(b, nil)
		if err != nil {
			var de *genrt.DecodeError
			if !errors.As(err, &de) {
				t.Fatalf("error without context: %v", err)
			}
			return
		}
		// Whatever decodes re-encodes to the same bytes: one encoding per value.
		if again := rref.AppendFrame(nil, m); !bytes.Equal(again, b) {
			t.Fatalf("decode/encode not canonical:\n in  %x\n out %x", b, again)
		}
	})
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
