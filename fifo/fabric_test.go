package fifo

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"testing"

	"pgregory.net/rapid"
)

// These tests need no libfabric: they drive the fabric provider's receive
// side (fabricRx) as a peer's puts would, into the ring of a mem end whose
// ordinary receive path then takes the messages.

// landOn returns the receiving end of a fresh pipe and a fabricRx that
// publishes into its ring, as a fabric end's progress goroutine does.
func landOn(t testing.TB, cfg Config) (*Conn, *fabricRx, func()) {
	a, b, err := Pipe(cfg)
	if err != nil {
		t.Fatal(err)
	}
	x := newFabricRx(b.l.rx(), b.cfg.EagerLimit, b.rxDone.Load)
	return b, x, func() { a.Close(); b.Close() }
}

// fabricWriter is the sending side of fabricLink.put, writing straight into
// the peer's ring: the header word with sequence 0, then the payload.
type fabricWriter struct {
	r     *ring
	pos   uint64
	seq   uint32
	cells uint64
}

// write places message p (or a pad first, if p would pass the ring's end)
// and returns the cell indexes to signal, in order.
func (w *fabricWriter) write(p []byte) []uint32 {
	var sigs []uint32
	need := cellsFor(len(p))
	if off := w.pos & (w.cells - 1); off+need > w.cells {
		pad := w.cells - off
		w.word(header{length: uint32(pad), kind: kindPad}, nil)
		sigs = append(sigs, uint32(off))
		w.pos += pad
	}
	sigs = append(sigs, uint32(w.pos&(w.cells-1)))
	w.word(header{length: uint32(len(p)), kind: kindData, flags: flagCredit}, p)
	w.pos += need
	return sigs
}

func (w *fabricWriter) word(h header, p []byte) {
	off := w.r.cellOff(w.pos)
	copy(w.r.mem[off+headerSize:], p)
	binary.LittleEndian.PutUint64(w.r.mem[off:], h.pack()&^seqMask)
}

// TestFabricRxReorderedPuts: a provider may complete a peer's writes in any
// order; every message is still received once, whole and in send order,
// across pads and laps, and the sender never overruns the receiver.
func TestFabricRxReorderedPuts(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		cells := uint64(1) << rapid.IntRange(4, 7).Draw(rt, "log2cells")
		cfg := Config{Cells: cells, EagerLimit: int(cells*Cell/4) - headerSize}
		b, x, done := landOn(t, cfg)
		defer done()
		sizes := rapid.SliceOfN(rapid.IntRange(0, cfg.EagerLimit), 1, 80).Draw(rt, "sizes")
		w := &fabricWriter{r: b.l.rx(), cells: cells}
		var pending []uint32
		sent, got := 0, 0
		for got < len(sizes) {
			// The sender writes what its credits allow (as it was told: rxDone).
			for sent < len(sizes) {
				need := cellsFor(sizes[sent])
				if off := w.pos & (cells - 1); off+need > cells {
					need += cells - off
				}
				if w.pos+need-b.rxDone.Load() > cells {
					break
				}
				pending = append(pending, w.write(pattern(sent, sizes[sent]))...)
				sent++
			}
			// Completions arrive in any order; some are held back.
			if len(pending) > 0 {
				perm := rapid.Permutation(pending).Draw(rt, "order")
				k := rapid.IntRange(1, len(perm)).Draw(rt, "delivered")
				for _, idx := range perm[:k] {
					if _, err := x.put(idx); err != nil {
						rt.Fatalf("put at cell %d: %v", idx, err)
					}
				}
				pending = perm[k:]
			}
			for {
				var msg []byte
				ok, err := b.Poll(func(p []byte) error { msg = append([]byte(nil), p...); return nil })
				if err != nil {
					rt.Fatal(err)
				}
				if !ok {
					break
				}
				if !bytes.Equal(msg, pattern(got, sizes[got])) {
					rt.Fatalf("message %d: %d bytes, want %d", got, len(msg), sizes[got])
				}
				got++
			}
		}
	})
}

// TestFabricRxRefusesAHostilePeer: what a corrupt or hostile peer can write
// and signal is refused as ErrCorrupt, before anything of it is published.
func TestFabricRxRefusesAHostilePeer(t *testing.T) {
	const cells = 16
	cfg := Config{Cells: cells, EagerLimit: 248}
	cases := []struct {
		name string
		do   func(w *fabricWriter, x *fabricRx) error
	}{
		{"signal outside the ring", func(w *fabricWriter, x *fabricRx) error {
			_, err := x.put(cells)
			return err
		}},
		{"two signals at one cell", func(w *fabricWriter, x *fabricRx) error {
			w.write([]byte("a"))
			w.write([]byte("b"))
			if _, err := x.put(1); err != nil {
				return nil
			}
			_, err := x.put(1)
			return err
		}},
		{"a header that publishes itself", func(w *fabricWriter, x *fabricRx) error {
			w.write([]byte("a"))
			binary.LittleEndian.PutUint64(w.r.mem[w.r.cellOff(0):], header{seq: 1, length: 1, kind: kindData, flags: flagCredit}.pack())
			_, err := x.put(0)
			return err
		}},
		{"an unknown kind", func(w *fabricWriter, x *fabricRx) error {
			w.word(header{length: 1}, nil)
			_, err := x.put(0)
			return err
		}},
		{"above the eager limit", func(w *fabricWriter, x *fabricRx) error {
			w.word(header{length: 249, kind: kindData, flags: flagCredit}, nil)
			_, err := x.put(0)
			return err
		}},
		{"past the ring's end", func(w *fabricWriter, x *fabricRx) error {
			w.pos = cells - 1
			x.nextPos = cells - 1
			w.word(header{length: 100, kind: kindData, flags: flagCredit}, nil)
			_, err := x.put(cells - 1)
			return err
		}},
		{"a pad short of the end", func(w *fabricWriter, x *fabricRx) error {
			w.word(header{length: 3, kind: kindPad}, nil)
			_, err := x.put(0)
			return err
		}},
		{"a rendezvous request of the wrong size", func(w *fabricWriter, x *fabricRx) error {
			w.word(header{length: 4, kind: kindRdv, flags: flagCredit}, nil)
			_, err := x.put(0)
			return err
		}},
		{"past the credits", func(w *fabricWriter, x *fabricRx) error {
			for i := 0; i < cells; i++ {
				for _, idx := range w.write([]byte{byte(i)}) {
					if _, err := x.put(idx); err != nil {
						return nil
					}
				}
			}
			// Nothing consumed: a 17th message overwrites the first.
			w.write([]byte("x"))
			_, err := x.put(0)
			return err
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b, x, done := landOn(t, cfg)
			defer done()
			w := &fabricWriter{r: b.l.rx(), cells: cells}
			err := tc.do(w, x)
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("got %v, want ErrCorrupt", err)
			}
			// Nothing refused was published: the ring holds only what was
			// accepted before. (A peer that writes a whole published header
			// itself needs no signal to be read, as over shared memory: the
			// ring's checks on taking are what bound it.)
			accepted := map[string]bool{"past the credits": true, "two signals at one cell": true, "a header that publishes itself": true}
			if ok, err := b.Poll(func([]byte) error { return nil }); ok && !accepted[tc.name] {
				t.Fatalf("a message was published before the refusal (%v)", err)
			}
		})
	}
}

// FuzzFabricRx applies arbitrary writes and signals: the receive side
// refuses or publishes, never panics, and what it publishes is a header
// the ring's checks accept.
func FuzzFabricRx(f *testing.F) {
	f.Add([]byte{0, 1, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Add(bytes.Repeat([]byte{3, 0, 0x81, 0x20, 0, 0, 0, 0, 0, 0}, 20))
	f.Fuzz(func(t *testing.T, ops []byte) {
		b, x, done := landOn(t, Config{Cells: 16, EagerLimit: 248, Spin: 16})
		defer done()
		r := b.l.rx()
		// Each op: a cell (1 byte), then a word to write there (8 bytes; all
		// zero: none), then signal that cell if the op's last byte is odd.
		for len(ops) >= 10 {
			idx := uint32(ops[0] % 20) // now and then outside the ring
			w := binary.LittleEndian.Uint64(ops[1:9])
			if w != 0 && idx < 16 {
				binary.LittleEndian.PutUint64(r.mem[r.cellOff(uint64(idx)):], w)
			}
			if ops[9]&1 == 1 {
				before := x.nextPos
				if _, err := x.put(idx); err != nil {
					if !errors.Is(err, ErrCorrupt) {
						t.Fatalf("error %v is not ErrCorrupt", err)
					}
					return
				}
				for p := before; p < x.nextPos; {
					h := unpack(*r.pubWord(p))
					if err := r.validate(p, h, 248); err != nil {
						t.Fatalf("published a header the ring refuses: %v", err)
					}
					p += h.cells()
				}
			}
			ops = ops[10:]
		}
		// The receiver takes whatever was published, or refuses it.
		for {
			ok, err := b.Poll(func([]byte) error { return nil })
			if err != nil || !ok {
				return
			}
		}
	})
}

// TestExtendCredit: an explicit credit return carries 29 bits; the sender
// widens it, across the wrap, and ignores one that an earlier return
// overtook.
func TestExtendCredit(t *testing.T) {
	const wrap = 1 << sigShift
	cases := []struct {
		known uint64
		sent  uint64 // the true value sent
		want  uint64
	}{
		{0, 16, 16},
		{100, 100, 100},
		{wrap - 10, wrap + 5, wrap + 5},
		{5*wrap - 1, 5*wrap + 1<<18, 5*wrap + 1<<18},
		{1 << 62, 1<<62 + 300, 1<<62 + 300},
		{1000, 900, 1000},              // overtaken: stale
		{wrap + 3, wrap - 7, wrap + 3}, // stale across the wrap
	}
	for _, c := range cases {
		if got := extendCredit(c.known, uint32(c.sent&sigArg)); got != c.want {
			t.Errorf("known %d, sent %d: got %d, want %d", c.known, c.sent, got, c.want)
		}
	}
}

// TestFabricCard: a card survives its encoding; truncated or oversized
// ones are refused as ErrAuth.
func TestFabricCard(t *testing.T) {
	c := fabricCard{provider: "tcp;ofi_rxm", addr: []byte{1, 2, 3, 4, 5}, ring: 1 << 40, ringKey: 7, bulk: 9, bulkKey: ^uint64(0)}
	b := c.append(nil)
	got, err := parseFabricCard(b[2:], "peer")
	if err != nil || got.provider != c.provider || !bytes.Equal(got.addr, c.addr) || got.ring != c.ring || got.ringKey != c.ringKey || got.bulk != c.bulk || got.bulkKey != c.bulkKey {
		t.Fatalf("round trip: %+v, %v", got, err)
	}
	for n := 0; n < len(b)-2; n++ {
		if _, err := parseFabricCard(b[2:2+n], "peer"); !errors.Is(err, ErrAuth) {
			t.Fatalf("a card cut to %d bytes: %v", n, err)
		}
	}
	if _, err := parseFabricCard(append(b[2:], 0), "peer"); !errors.Is(err, ErrAuth) {
		t.Fatalf("a card with a byte more: %v", err)
	}
	if _, err := DialFabric(context.Background(), "127.0.0.1:1", nil, Config{Cells: 3}); !errors.Is(err, ErrConfig) {
		t.Fatalf("a bad geometry: %v", err)
	}
}
