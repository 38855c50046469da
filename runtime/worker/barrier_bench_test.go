package worker

import (
	"errors"
	"fmt"
	"testing"

	"github.com/rrefkit/rref/genrt"
)

// The barrier's report was encoded by hand before the group protocol was
// declared in spec/group.rspec; the benchmark keeps that codec as the
// yardstick the generated one must not fall behind.

const handBarrierTag = 0xB7

func handAppendBarrier(b []byte, r barrierReport) []byte {
	b = append(b, handBarrierTag)
	b = genrt.AppendUvarint(b, r.round)
	idle := byte(0)
	if r.idle {
		idle = 1
	}
	b = append(b, idle)
	b = genrt.AppendUvarint(b, uint64(len(r.sent)))
	for i := range r.sent {
		b = genrt.AppendUvarint(b, r.sent[i])
		b = genrt.AppendUvarint(b, r.taken[i])
	}
	return b
}

func handConsumeBarrier(b []byte, members int) (barrierReport, error) {
	var r barrierReport
	if len(b) < 1 || b[0] != handBarrierTag {
		return r, errBadBarrier
	}
	b = b[1:]
	next := func() (uint64, bool) {
		v, n, err := genrt.ConsumeUvarint(b)
		if err != nil {
			return 0, false
		}
		b = b[n:]
		return v, true
	}
	var ok bool
	if r.round, ok = next(); !ok || len(b) < 1 || b[0] > 1 {
		return r, errBadBarrier
	}
	r.idle, b = b[0] == 1, b[1:]
	if n, ok := next(); !ok || n != uint64(members) {
		return r, fmt.Errorf("%w: counts for %d members", errBadBarrier, n)
	}
	r.sent, r.taken = make([]uint64, members), make([]uint64, members)
	for i := 0; i < members; i++ {
		s, ok1 := next()
		t, ok2 := next()
		if !ok1 || !ok2 {
			return r, errBadBarrier
		}
		r.sent[i], r.taken[i] = s, t
	}
	if len(b) != 0 {
		return r, errors.New("trailing bytes")
	}
	return r, nil
}

// BenchmarkBarrierReport encodes and decodes a report of a 16-member group,
// generated codec against the hand-written one it replaced.
func BenchmarkBarrierReport(b *testing.B) {
	const members = 16
	r := barrierReport{round: 12345, idle: true, counts: counts{sent: make([]uint64, members), taken: make([]uint64, members)}}
	for i := range members {
		r.sent[i], r.taken[i] = uint64(1000*i), uint64(999*i)
	}
	for _, c := range []struct {
		name string
		app  func([]byte, barrierReport) []byte
		cons func([]byte, int) (barrierReport, error)
	}{{"generated", appendBarrier, consumeBarrier}, {"hand-written", handAppendBarrier, handConsumeBarrier}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			buf := make([]byte, 0, 256)
			for b.Loop() {
				buf = c.app(buf[:0], r)
				if _, err := c.cons(buf, members); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
