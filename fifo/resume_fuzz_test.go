package fifo

import (
	"bytes"
	"context"
	"errors"
	"testing"
)

// resumeSender is a resumable link that has put msgs (and holds one
// placed rendezvous payload, id 7, as if its request were the first put):
// the end whose regenerate a peer's resume state drives.
func resumeSender(t *testing.T, msgs ...[]byte) *tcpLink {
	cfg := mustDefaults(Config{Cells: fuzzCells, MaxMessage: 1 << 12, Spin: 1})
	c := newTCPLinkOn(&wire{nc: &streamConn{r: bytes.NewReader(nil)}}, cfg, newResumer(sessionID{}, "fuzz"))
	t.Cleanup(func() { c.Close() })
	for _, m := range msgs {
		if err := c.Send(context.Background(), m); err != nil {
			t.Fatal(err)
		}
	}
	l := c.l.(*tcpLink)
	l.bmu.Lock()
	l.out[7] = &outBulk{data: bytes.Repeat([]byte{7}, 3*bulkChunk/2), placed: true}
	l.bmu.Unlock()
	return l
}

// FuzzResumeState feeds a peer's resume state, as it arrives after a
// re-dial, to the sender's side of a resume: parsing and regenerating must
// refuse what is inconsistent with ErrCorrupt, never panic, and never
// send from outside the one ring of puts the sender keeps.
func FuzzResumeState(f *testing.F) {
	state := func(s resumeState) []byte { return s.append(nil) }
	f.Add(state(resumeState{nextSeq: 1}))
	f.Add(state(resumeState{nextPos: 1, nextSeq: 2, consumed: 1}))
	f.Add(state(resumeState{nextPos: 1, nextSeq: 2, held: []heldBulk{{7, bulkChunk}}}))
	f.Add(state(resumeState{nextPos: 5, nextSeq: 3, held: []heldBulk{{7, 3 * bulkChunk / 2}}}))
	f.Add(state(resumeState{nextPos: 1 << 40, nextSeq: 9}))
	f.Fuzz(func(t *testing.T, b []byte) {
		buf := make([]byte, resumeStateSize)
		copy(buf, b)
		l := resumeSender(t, []byte("hi"), make([]byte, 200), make([]byte, Immediate))
		peer, err := parseResumeState(buf, l.cfg.BulkSlots)
		if err == nil {
			l.wmu.Lock()
			_, err = l.regenerate(peer)
			end := l.txEnd
			l.wmu.Unlock()
			if err == nil && (peer.nextPos > end || end-peer.nextPos > l.cfg.Cells) {
				t.Fatalf("regenerated from cell %d; the sender put up to %d", peer.nextPos, end)
			}
		}
		if err != nil && !errors.Is(err, ErrCorrupt) {
			t.Fatalf("refused without ErrCorrupt: %v", err)
		}
	})
}
