package fifo

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
)

// TestResumeReportLayout: the resume report, now generated from
// spec/fifowire.rspec, keeps the bytes it had when written by hand, field by
// field; it decodes back to the state it came from; and a report of more
// payloads than the connection's slots is a corrupt peer.
func TestResumeReportLayout(t *testing.T) {
	s := resumeState{nextPos: 1<<40 + 3, consumed: 1 << 33, nextSeq: 0xfffffffe, held: []heldBulk{{7, 4096}, {9, 1}}}
	got := s.append(nil)
	var want []byte
	want = binary.LittleEndian.AppendUint64(want, s.nextPos)
	want = binary.LittleEndian.AppendUint64(want, s.consumed)
	want = binary.LittleEndian.AppendUint32(want, s.nextSeq)
	want = binary.LittleEndian.AppendUint32(want, uint32(len(s.held)))
	ids, lens := make([]byte, 4*maxBulkSlots), make([]byte, 4*maxBulkSlots)
	for i, h := range s.held {
		binary.LittleEndian.PutUint32(ids[4*i:], h.id)
		binary.LittleEndian.PutUint32(lens[4*i:], h.n)
	}
	want = append(append(want, ids...), lens...)
	if !bytes.Equal(got, want) || len(got) != resumeStateSize {
		t.Fatalf("the report's bytes moved (%d bytes, want %d):\n got  %x\n want %x", len(got), resumeStateSize, got, want)
	}
	back, err := parseResumeState(got, 2)
	if err != nil || back.nextPos != s.nextPos || back.consumed != s.consumed || back.nextSeq != s.nextSeq || len(back.held) != 2 || back.held[1] != s.held[1] {
		t.Fatalf("decoded %+v, %v; want %+v", back, err, s)
	}
	var ce *CorruptError
	if _, err := parseResumeState(got, 1); !errors.As(err, &ce) {
		t.Fatalf("two payloads held on a connection of one slot: %v; want a CorruptError", err)
	}
	if _, err := parseResumeState(got[:len(got)-1], 2); !errors.As(err, &ce) {
		t.Fatalf("a report a byte short: %v; want a CorruptError", err)
	}
}
