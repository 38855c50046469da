package fifo

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"testing"
	"time"
)

// TestTCPAbortOfPayloadBeingDelivered: a peer aborts the rendezvous whose
// payload RecvFunc is handing out in place, then streams another payload.
// The abort pools the buffer under the receiver's feet; the next payload is
// assembled into it while fn still reads it. A finish or a chunk could not
// do this before frameAbort: an abort of a payload whose request was taken
// must be a corrupt peer.
func TestTCPAbortOfPayloadBeingDelivered(t *testing.T) {
	cfg := mustDefaults(Config{Cells: fuzzCells, MaxMessage: 1 << 12, BulkSlots: 1, Spin: 1})
	first := bytes.Repeat([]byte("a"), 2000)
	second := bytes.Repeat([]byte("b"), 2000)
	ours, theirs := net.Pipe()
	defer theirs.Close()
	go io.Copy(io.Discard, theirs)
	c := newTCPLink(ours, cfg, nil)
	defer c.Close()
	go theirs.Write(append(appendBulk(nil, 1, len(first), 0, first), rdvRequestFrame(1, uint32(len(first)))...))

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	inFn := make(chan struct{})
	go func() {
		<-inFn
		go theirs.Write(appendBulk(appendAbort(nil, 1), 2, len(second), 0, second))
		// A sender out of credits reads the socket meanwhile.
		sctx, scancel := context.WithTimeout(context.Background(), time.Second)
		defer scancel()
		for c.Send(sctx, make([]byte, 900)) == nil {
		}
	}()
	var seen []byte
	err := c.RecvFunc(ctx, func(p []byte) error {
		close(inFn)
		time.Sleep(300 * time.Millisecond)
		seen = append(seen, p...)
		return nil
	})
	if err != nil {
		t.Logf("RecvFunc: %v", err)
	}
	if !bytes.Equal(seen, first) {
		t.Fatalf("the payload changed under RecvFunc's fn: %q... (err %v, link %v)", seen[:8], err, c.err())
	}
	if c.err() == nil {
		t.Fatalf("an abort of a rendezvous whose request was taken was accepted")
	}
}

// TestTCPAbortFrame: an abort drops what came of a payload, freeing its
// place among BulkSlots for the next; an abort of a payload of which
// nothing came is a corrupt peer.
func TestTCPAbortFrame(t *testing.T) {
	cfg := mustDefaults(Config{Cells: fuzzCells, MaxMessage: 1 << 12, BulkSlots: 1, Spin: 1})
	whole := bytes.Repeat([]byte("z"), 300)
	stream := appendBulk(nil, 1, 300, 0, whole[:100])
	stream = appendAbort(stream, 1)
	stream = appendBulk(stream, 2, 300, 0, whole)
	stream = append(stream, rdvRequestFrame(2, 300)...)
	c := newTCPLink(&streamConn{r: bytes.NewReader(stream)}, cfg, nil)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	got, err := c.Recv(ctx, nil)
	if err != nil || !bytes.Equal(got, whole) {
		t.Fatalf("the payload after an aborted one: %d bytes, %v", len(got), err)
	}
	c2 := newTCPLink(&streamConn{r: bytes.NewReader(appendAbort(nil, 9))}, cfg, nil)
	defer c2.Close()
	if _, err := c2.Recv(ctx, nil); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("an abort of nothing: %v, want a corrupt peer", err)
	}
}

// rdvRequestFrame is the put frame of a rendezvous request, at the ring's
// first cell, for payload id of n bytes.
func rdvRequestFrame(id, n uint32) []byte {
	l := &tcpLink{}
	var p [8]byte
	binary.LittleEndian.PutUint32(p[:], id)
	binary.LittleEndian.PutUint32(p[4:], n)
	l.put(0, header{seq: 1, length: 8, kind: kindRdv, flags: flagCredit}, p[:])
	return l.wbuf
}
