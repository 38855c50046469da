package genrt

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
)

// The checks below are what the tests rrefgen writes for every package
// call: they hold for any protocol, so they live here once, and each
// returns the problems it found (none when the code is right).

// CheckFrame checks one message's codec: SizeFrame is the frame's length,
// Decode and a Decoder give the message back, every strict prefix of the
// frame is refused, and a trailing byte is refused with ErrTrailing.
func CheckFrame[M any](m M, size func(M) int, appendFrame func([]byte, M) []byte,
	decode func([]byte) (M, error), decodeReused func([]byte) (M, error)) []string {
	var out []string
	frame := appendFrame(nil, m)
	if n := size(m); n != len(frame) {
		out = append(out, fmt.Sprintf("SizeFrame says %d bytes, AppendFrame wrote %d", n, len(frame)))
	}
	if got, err := decode(frame); err != nil || !reflect.DeepEqual(got, m) {
		out = append(out, fmt.Sprintf("Decode gave %+v, %v; want %+v", got, err, m))
	}
	if got, err := decodeReused(frame); err != nil || !reflect.DeepEqual(got, m) {
		out = append(out, fmt.Sprintf("Decoder.Decode gave %+v, %v; want %+v", got, err, m))
	}
	for i := range frame {
		if _, err := decode(frame[:i]); err == nil {
			out = append(out, fmt.Sprintf("the frame's first %d of %d bytes decode", i, len(frame)))
			break
		}
	}
	long := append(bytes.Clone(frame), 0)
	if _, err := decode(long); !errors.Is(err, ErrTrailing) {
		out = append(out, fmt.Sprintf("a trailing byte gives %v, want ErrTrailing", err))
	}
	return out
}

// CheckReencode is the fuzz property of a decoder: any input is decoded or
// refused with a *DecodeError, and what decodes encodes back to the same
// bytes (one encoding per value: canonical varints, strict bools, declared
// enum values, no trailing bytes).
func CheckReencode[M any](b []byte, decode func([]byte) (M, error), appendFrame func([]byte, M) []byte) error {
	m, err := decode(b)
	if err != nil {
		var de *DecodeError
		if !errors.As(err, &de) {
			return fmt.Errorf("an error without its context: %w", err)
		}
		return nil
	}
	if again := appendFrame(nil, m); !bytes.Equal(again, b) {
		return fmt.Errorf("decode then encode is not the identity:\n in  %x\n out %x", b, again)
	}
	return nil
}

// CheckMachine checks a machine's step function against its declaration:
// every declared move moves, every declared ignore is Ignored, every other
// (state, event) pair is a *TransitionError naming the machine, state and
// event, and a state out of range is refused.
func CheckMachine(info MachineInfo, step func(s, e int) (int, Outcome, error)) []string {
	var out []string
	states := map[string]int{}
	for i, s := range info.States {
		states[s.Name] = i
	}
	events := map[string]int{}
	for i, e := range info.Events {
		events[e.Name] = i
	}
	declared := map[[2]int]int{} // -> the target state, or -1 for an ignore
	for _, tr := range info.Transitions {
		to := -1
		if tr.To != "" {
			to = states[tr.To]
		}
		declared[[2]int{states[tr.From], events[tr.Event]}] = to
	}
	for s, st := range info.States {
		for e, ev := range info.Events {
			next, outcome, err := step(s, e)
			to, ok := declared[[2]int{s, e}]
			switch {
			case !ok:
				var te *TransitionError
				if !errors.As(err, &te) || te.Machine != info.Name || te.State != st.Name || te.Event != ev.Name || next != s {
					out = append(out, fmt.Sprintf("%s: (%s, %s) should be illegal, got %d %v %v", info.Name, st.Name, ev.Name, next, outcome, err))
				}
			case to < 0:
				if err != nil || outcome != Ignored || next != s {
					out = append(out, fmt.Sprintf("%s: (%s, %s) should be ignored, got %d %v %v", info.Name, st.Name, ev.Name, next, outcome, err))
				}
			default:
				if err != nil || outcome != Moved || next != to {
					out = append(out, fmt.Sprintf("%s: (%s, %s) should move to %s, got %d %v %v", info.Name, st.Name, ev.Name, info.States[to].Name, next, outcome, err))
				}
			}
		}
	}
	if _, _, err := step(len(info.States), 0); !errors.Is(err, ErrIllegalTransition) {
		out = append(out, fmt.Sprintf("%s: a state out of range is accepted", info.Name))
	}
	return out
}

// CheckLayout checks one layout's codec on a sample: Append writes size
// bytes, Consume gives the sample back and reads size bytes, every strict
// prefix is refused with ErrTruncated, and a bool byte (at boolOffsets)
// other than 0 or 1 is refused with ErrBadBool.
func CheckLayout[L comparable](sample L, size int, appendLayout func([]byte, *L) []byte,
	consume func([]byte) (L, int, error), boolOffsets []int) []string {
	var out []string
	b := appendLayout(nil, &sample)
	if len(b) != size {
		out = append(out, fmt.Sprintf("Append wrote %d bytes, the layout's size is %d", len(b), size))
	}
	if got, n, err := consume(b); err != nil || n != size || got != sample {
		out = append(out, fmt.Sprintf("Consume gave %+v, %d bytes, %v; want %+v, %d bytes", got, n, err, sample, size))
	}
	for i := range b {
		if _, _, err := consume(b[:i]); !errors.Is(err, ErrTruncated) {
			out = append(out, fmt.Sprintf("the first %d of %d bytes give %v, want ErrTruncated", i, len(b), err))
			break
		}
	}
	for _, off := range boolOffsets {
		bad := bytes.Clone(b)
		bad[off] = 2
		if _, _, err := consume(bad); !errors.Is(err, ErrBadBool) {
			out = append(out, fmt.Sprintf("a bool byte of 2 at offset %d gives %v, want ErrBadBool", off, err))
		}
	}
	return out
}

// CheckLayoutReencode is the fuzz property of a layout's decoder: any
// input is decoded or refused with a *DecodeError, and what decodes
// encodes back to the bytes it was read from.
func CheckLayoutReencode[L any](b []byte, consume func([]byte) (L, int, error), appendLayout func([]byte, *L) []byte) error {
	v, n, err := consume(b)
	if err != nil {
		var de *DecodeError
		if !errors.As(err, &de) {
			return fmt.Errorf("an error without its context: %w", err)
		}
		return nil
	}
	if again := appendLayout(nil, &v); !bytes.Equal(again, b[:n]) {
		return fmt.Errorf("decode then encode is not the identity:\n in  %x\n out %x", b[:n], again)
	}
	return nil
}
