package fifo

import (
	"bytes"
	"context"
	"errors"
	"net"
	"pgregory.net/rapid"
	"testing"
	"time"
)

// streamConn is a net.Conn that reads a fixed byte stream, then EOF, and
// discards writes: the fuzzed peer, without a second goroutine.
type streamConn struct{ r *bytes.Reader }

func (s *streamConn) Read(p []byte) (int, error)       { return s.r.Read(p) }
func (s *streamConn) Write(p []byte) (int, error)      { return len(p), nil }
func (s *streamConn) Close() error                     { return nil }
func (s *streamConn) LocalAddr() net.Addr              { return &net.TCPAddr{} }
func (s *streamConn) RemoteAddr() net.Addr             { return &net.TCPAddr{} }
func (s *streamConn) SetDeadline(time.Time) error      { return nil }
func (s *streamConn) SetReadDeadline(time.Time) error  { return nil }
func (s *streamConn) SetWriteDeadline(time.Time) error { return nil }

const fuzzCells = 64

// fuzzRecvBound bounds one fuzzed Recv: far above what reading a stream
// that ends takes, so that reaching it is a reader that hangs (reported).
const fuzzRecvBound = 10 * time.Second

// ringImage sends msgs through a fresh pipe and returns the receiving ring's
// cells as a seed: a valid image for the fuzzer to mutate.
func ringImage(msgs ...[]byte) []byte {
	a, b, _ := Pipe(Config{Cells: fuzzCells, MaxMessage: 1 << 12})
	defer a.Close()
	defer b.Close()
	for _, m := range msgs {
		a.Send(context.Background(), m)
	}
	r := b.l.rx()
	return append([]byte(nil), r.mem[ctlSize:]...)
}

// FuzzRecvRing runs the receive path over arbitrary ring contents: it must
// return messages or an error, never panic or read outside the region.
func FuzzRecvRing(f *testing.F) {
	f.Add(ringImage([]byte("hello")))
	f.Add(ringImage(make([]byte, 100), make([]byte, 3000), []byte{1}))
	f.Add(ringImage(make([]byte, 2000), make([]byte, 900), make([]byte, 700), make([]byte, 2000)))
	f.Fuzz(func(t *testing.T, cells []byte) {
		// Both receive paths: the general one, and an exclusive end's
		// direct path for one-cell messages, which hands the rest over.
		var got [2][][]byte
		for i, exclusive := range []bool{false, true} {
			got[i] = recvImage(t, cells, exclusive)
		}
		if len(got[0]) != len(got[1]) {
			t.Fatalf("%d messages, %d on an exclusive end", len(got[0]), len(got[1]))
		}
		for i := range got[0] {
			if !bytes.Equal(got[0][i], got[1][i]) {
				t.Fatalf("message %d: % x, on an exclusive end % x", i, got[0][i], got[1][i])
			}
		}
	})
}

// recvImage receives what a ring holding cells yields, until an error.
func recvImage(t *testing.T, cells []byte, exclusive bool) (msgs [][]byte) {
	a, b, err := Pipe(Config{Cells: fuzzCells, MaxMessage: 1 << 12, Spin: 1, Exclusive: exclusive})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	defer b.Close()
	copy(b.l.rx().mem[ctlSize:], cells)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for i := 0; i < 2*fuzzCells; i++ {
		buf, err := b.Recv(ctx, nil)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, context.Canceled) && !errors.Is(err, ErrClosed) {
				t.Fatalf("unexpected error %v", err)
			}
			return msgs
		}
		if len(buf) > 1<<12 {
			t.Fatalf("message of %d bytes past the limit", len(buf))
		}
		msgs = append(msgs, buf)
	}
	return msgs
}

// FuzzTCPFrames feeds an arbitrary byte stream to the tcp frame reader after
// a valid handshake: every malformed frame must close the connection with an
// error, never panic or write outside the local image.
func FuzzTCPFrames(f *testing.F) {
	put := func(pos uint64, seq uint32, kind uint8, payload []byte) []byte {
		l := &tcpLink{}
		l.put(pos, header{seq: seq, length: uint32(len(payload)), kind: kind, flags: flagCredit}, payload)
		return l.wbuf
	}
	f.Add(put(0, 1, kindData, []byte("hi")))
	f.Add(append(put(0, 1, kindData, make([]byte, 200)), put(4, 2, kindData, nil)...))
	f.Add([]byte{frameCredit, 1, 0, 0, 0, 0, 0, 0, 0})
	f.Add([]byte{frameBulk, 1, 0, 0, 0, 4, 0, 0, 0, 0, 0, 0, 0, 4, 0, 0, 0, 'a', 'b', 'c', 'd'})
	f.Add([]byte{frameClose})
	f.Add(appendAbort(appendBulk(nil, 1, 8, 0, []byte("abcd")), 1))
	f.Add(appendAbort(nil, 7))
	f.Fuzz(func(t *testing.T, stream []byte) {
		cfg := mustDefaults(Config{Cells: fuzzCells, MaxMessage: 1 << 12, Spin: 1})
		c := newTCPLink(&streamConn{r: bytes.NewReader(stream)}, cfg, nil)
		// A live context: Recv reads the stream's frames itself (a canceled
		// one returned before reading any, and the reader went unfuzzed).
		// The stream ends in EOF, which ends every wait; the bound is only
		// for a reader that would wait past it.
		ctx, cancel := context.WithTimeout(context.Background(), fuzzRecvBound)
		defer cancel()
		var buf []byte
		var err error
		for i := 0; i < 2*fuzzCells; i++ {
			if buf, err = c.Recv(ctx, buf); err != nil {
				break
			}
		}
		if errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Recv waited %v on a stream that had ended", fuzzRecvBound)
		}
		c.Close()
	})
}

// TestImmediateWordIsAHeader checks the direct paths' header arithmetic
// against pack and unpack: the word built for a one-cell message is its
// header packed, and the direct receiver takes exactly the words the
// general path would deliver as a one-cell data message with a credit.
func TestImmediateWordIsAHeader(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		seq := rapid.Uint32().Draw(rt, "seq")
		n := rapid.IntRange(0, Immediate).Draw(rt, "length")
		credit := rapid.Uint32().Draw(rt, "credit")
		want := header{seq: seq, length: uint32(n), credit: credit, kind: kindData, flags: flagCredit}.pack()
		if got := immediateWord(seq, n, credit); got != want {
			rt.Fatalf("immediateWord = %#x, pack = %#x", got, want)
		}
		w := rapid.Uint64().Draw(rt, "word")
		h := unpack(w)
		length, ok := immediateLength(w)
		wantOK := h.kind == kindData && h.flags&flagCredit != 0 && h.length <= Immediate
		if ok != wantOK || (ok && length != h.length) {
			rt.Fatalf("word %#x: immediateLength = %d, %v; header %+v", w, length, ok, h)
		}
	})
}
