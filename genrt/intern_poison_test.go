package genrt_test

import (
	"fmt"
	"testing"

	"github.com/rrefkit/rref/generated/rref"
)

// TestInternerNotPoisonedByOneOffStrings: one Decoder serves all of a
// core's peers, and error texts differ from answer to answer (an id in
// them). Thousands of them must not take the room of a function's name
// first called afterwards (review: they filled the interner, and every
// later name was allocated on every call).
func TestInternerNotPoisonedByOneOffStrings(t *testing.T) {
	var d rref.Decoder
	for i := range 4 * 1024 {
		f := rref.AppendFrame(nil, &rref.CallRet{CallID: uint64(i), Error: rref.ErrorKindUser, Message: fmt.Sprintf("no row with id %d", i)})
		if _, err := d.Decode(f); err != nil {
			t.Fatal(err)
		}
	}
	call := rref.AppendFrame(nil, &rref.Call{CallID: 1, Function: "lookupUser"})
	d.Decode(call)
	if n := testing.AllocsPerRun(100, func() { d.Decode(call) }); n != 0 {
		t.Errorf("after 4096 one-off error texts, decoding a call allocates %.0f times: its name is not interned", n)
	}
}
