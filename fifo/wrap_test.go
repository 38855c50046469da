package fifo

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"sync/atomic"
	"testing"
	"time"
)

// Every counter that wraps, started near its wrap point: the 16-bit
// piggybacked credit (2^20 cells), the 24-bit header sequence (2^24
// messages) and tcp's 32-bit frame sequence. Each test runs traffic in both
// directions across the wrap on every provider and mode, checking every byte.

// shiftPair moves a fresh, idle pair as if dir's sender had already sent
// pos cells in seq-1 messages, all consumed and credited: both ends of that
// direction agree, so the next message goes to cell pos with sequence seq.
func shiftDirection(tx, rx *Conn, pos uint64, seq uint32) {
	tx.txPos, tx.txSeq = pos, seq
	tx.peerCred.Store(pos)
	tx.peerCredLow = 0 // tx's receive side is another direction; see below
	rx.rxPos, rx.rxSeq, rx.rxReported, rx.doneStored = pos, seq, pos, pos
	rx.rxDone.Store(pos)
	switch l := tx.l.(type) {
	case *memLink:
		atomic.StoreUint64(l.tx.u64(offConsumed), pos)
	case *tcpLink:
		l.txCred.Store(pos)
		l.txEnd = pos
	}
	if l, ok := rx.l.(*tcpLink); ok {
		l.nextPos, l.nextSeq = pos, seq
	}
	if l, ok := tx.l.(interface{ shiftTx(pos uint64) }); ok { // fabric (fabric_ofi_test.go)
		l.shiftTx(pos)
	}
	if l, ok := rx.l.(interface{ shiftRx(pos uint64, seq uint32) }); ok {
		l.shiftRx(pos, seq)
	}
}

func shiftPair(a, b *Conn, pos uint64, seq uint32) {
	shiftDirection(a, b, pos, seq)
	shiftDirection(b, a, pos, seq)
	// The piggybacked credit each end last saw is the other's progress.
	a.peerCredLow = uint32(pos>>creditUnit) & 0xffff
	b.peerCredLow = a.peerCredLow
}

// exchange sends n messages of the given sizes from a to b, each answered
// by an echo, checking contents and order.
func exchange(t *testing.T, a, b *Conn, n int, size func(i int) int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		var buf []byte
		var err error
		for i := 0; i < n; i++ {
			if buf, err = b.Recv(ctx, buf); err != nil {
				errc <- fmt.Errorf("echo: recv %d: %w", i, err)
				return
			}
			if err = b.Send(ctx, buf); err != nil {
				errc <- fmt.Errorf("echo: send %d: %w", i, err)
				return
			}
		}
		errc <- nil
	}()
	var got []byte
	for i := 0; i < n; i++ {
		want := pattern(i, size(i))
		if err := a.Send(ctx, want); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
		var err error
		if got, err = a.Recv(ctx, got); err != nil {
			t.Fatalf("recv %d: %v", i, err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("message %d of %d bytes came back as %d bytes", i, len(want), len(got))
		}
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}

// sizes mixes one-cell, multi-cell (with pads at the ring's end) and
// rendezvous messages.
func wrapSizes(i int) int {
	switch i % 7 {
	case 0:
		return 3
	case 1:
		return Immediate
	case 2:
		return 200
	case 3:
		return 1500
	case 4:
		return 70 << 10 // rendezvous
	default:
		return i % 97
	}
}

func TestCountersAcrossTheirWrap(t *testing.T) {
	cfg := Config{Cells: 256, EagerLimit: 2048, MaxMessage: 256 << 10}
	cases := []struct {
		name string
		pos  uint64
		seq  uint32
	}{
		{"credit-16bit", 1<<(16+creditUnit) - 40, 1000},
		{"credit-twice", 2<<(16+creditUnit) - 40, 5000},
		{"seq-24bit", 12345, seqMask - 20},
		{"seq-32bit", 99999, ^uint32(0) - 20},
		{"pos-64bit-far", 1 << 62, 77},
	}
	for name, pair := range modes() {
		for _, tc := range cases {
			t.Run(name+"/"+tc.name, func(t *testing.T) {
				a, b := pair(t, cfg)
				defer a.Close()
				defer b.Close()
				shiftPair(a, b, tc.pos, tc.seq)
				exchange(t, a, b, 300, wrapSizes)
			})
		}
	}
}

// TestTCPPastTwoToTheTwentyCells is the regression of a tcp connection that
// died once one side had received 2^20 cells: its piggybacked credit no
// longer fit its 16-bit field, and the peer refused the next message.
func TestTCPPastTwoToTheTwentyCells(t *testing.T) {
	cfg := Config{}
	a, b := tcpPair(t, cfg)
	defer a.Close()
	defer b.Close()
	big := mustDefaults(cfg).EagerLimit
	n := (1<<20)/int(cellsFor(big)) + 64
	if testing.Short() {
		t.Skip("sends 2^20 cells")
	}
	exchange(t, a, b, n, func(i int) int {
		if i%2 == 0 {
			return big
		}
		return 8
	})
}

// TestStaleCellIsNeverAHeader: a multi-cell message leaves its payload in
// cells that later laps use as header positions. A payload word that looks
// like the header due there must not be taken for a message that was never
// sent.
func TestStaleCellIsNeverAHeader(t *testing.T) {
	const cells = 16
	for name, pair := range modes() {
		t.Run(name, func(t *testing.T) {
			a, b := pair(t, Config{Cells: cells, EagerLimit: 128})
			defer a.Close()
			defer b.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			// Message 1 spans cells 0 and 1; its payload's word in cell 1
			// is the header of a one-cell message with sequence cells+1,
			// the one due at cell 1 on the next lap.
			first := make([]byte, Cell+8)
			forged := header{seq: cells + 1, length: 5, kind: kindData, flags: flagCredit}.pack()
			binary.LittleEndian.PutUint64(first[Cell-headerSize:], forged)
			send := func(p []byte) {
				if err := a.Send(ctx, p); err != nil {
					t.Fatal(err)
				}
				if _, err := b.Recv(ctx, nil); err != nil {
					t.Fatal(err)
				}
			}
			send(first)
			// Messages 2..cells fill cells 2..15 and 0 of the next lap.
			for i := 2; i <= cells; i++ {
				send([]byte{byte(i)})
			}
			got, err := b.Poll(func([]byte) error { return nil })
			if err != nil || got {
				t.Fatalf("a stale payload word was taken for a message: got %v, %v", got, err)
			}
		})
	}
}
