// Package fifo is a sender-managed remote FIFO transport with static credit
// flow control.
//
// A connection is two one-way rings, one per direction. Each ring is a region
// of N cells of 64 bytes owned by its sender: the sender copies a message into
// consecutive cells and publishes it by one atomic store of its header word;
// that store is the receiver's "remote event". The receiver polls the header
// word at its read position, spins briefly, then parks and is woken only on an
// idle-to-busy transition. Several goroutines may wait on one connection: a
// blocking Recv and pollers (Poll) that read the replies they wait for
// themselves instead of being handed them; while any polls, the peer is told
// not to wake the parked one. An end whose sends come from one goroutine at
// a time, and receives from one (Config.Exclusive), takes no lock per
// message.
//
// Ring region layout (offsets in bytes):
//
//	  0 +-----------------------------------------------------------+
//	    | line 0: magic | version | cell size | cells | token        |
//	 64 | line 1: consumed   (receiver: cells consumed; credits back) |
//	128 | line 2: sleeping   (receiver) | wake seq (sender, futex)    |
//	192 | line 3: heartbeat  (sender)   | closed                      |
//	256 +-----------------------------------------------------------+
//	    | cell 0 | cell 1 | ...                         | cell N-1   |
//	    +-----------------------------------------------------------+
//
// A message occupies ceil((8+len)/64) consecutive cells; its first cell
// starts with an 8-byte header, the publication word, and the payload
// follows contiguously. The word is stored last, with one atomic store:
//
//	bit 0        24    26  27             48             64
//	    +--------+-----+---+--------------+--------------+
//	    | seq    |kind |C  | length       | credit       |  then payload ...
//	    +--------+-----+---+--------------+--------------+
//
// kind is data, pad or rendezvous request; C says credit carries the
// sender's own receive progress for the reverse ring, in units of 16 cells;
// a pad's length counts cells. A message of at most 56 bytes fits in its
// header cell: an immediate put.
// A message that would run past the last cell is preceded by a pad record
// that fills the ring to its end, and starts again at cell 0:
//
//	| ...older... | PAD PAD PAD |      (end of ring)
//	| message cells ... |               (cell 0, next lap)
//
// seq counts messages from 1 (mod 2^24, skipping 0; a lap holds fewer) so a cell left from an earlier lap is
// never taken for a new message; credit piggybacks the sender's own receive
// progress for the reverse ring. Messages above the eager limit travel on the
// rendezvous channel: a short request on the ring, the payload fetched from
// a bulk slot the sender exposes, and a finish that frees the slot.
package fifo

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync/atomic"
	"unsafe"
)

// Cell is the size of one ring cell: a cache line.
const Cell = 64

const (
	ctlSize    = 4 * Cell
	headerSize = 8
	// Immediate is the largest payload that fits in the header cell.
	Immediate = Cell - headerSize

	offMagic     = 0
	offVersion   = 8  // u32
	offCellSize  = 12 // u32
	offCells     = 16
	offToken     = 24
	offConsumed  = 1 * Cell
	offSleeping  = 2 * Cell
	offWake      = 2*Cell + 4
	offHeartbeat = 3 * Cell
	offClosed    = 3*Cell + 8

	magic         = 0x4f4649466672_7272 // "rrfFIFO"-ish, little endian
	formatVersion = 2                   // 2: sequence numbers skip 0 mod 2^24, inner cells cleared
	tokenSize     = 32
)

// Message kinds on the ring.
const (
	kindData   = 1
	kindPad    = 2
	kindRdv    = 3 // rendezvous request: payload is slot (u32) and length (u32)
	flagCredit = 1 // the credit field carries the sender's receive progress

	seqBits    = 24
	seqMask    = 1<<seqBits - 1
	maxLength  = 1<<21 - 1
	creditUnit = 4 // piggybacked credit counts 1<<creditUnit cells
	creditMask = 0xffff
	maxCells   = 1 << 18
)

// Errors, matched with errors.Is.
var (
	ErrClosed   = errors.New("fifo: connection closed")
	ErrPeerDead = errors.New("fifo: peer died")
	ErrCorrupt  = errors.New("fifo: corrupt ring contents")
	ErrTooLarge = errors.New("fifo: message larger than the connection allows")
	ErrConfig   = errors.New("fifo: bad configuration")
	ErrAuth     = errors.New("fifo: handshake refused")
)

// CorruptError says what was wrong at which ring position; the connection is closed.
type CorruptError struct {
	Cell uint64
	Why  string
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("fifo: corrupt ring at cell %d: %s", e.Cell, e.Why)
}
func (e *CorruptError) Is(target error) bool { return target == ErrCorrupt }

// ring is one direction's region: the control lines and the cells. The same
// layout serves shared memory (both processes map it), memory in one process,
// and the receiver's local image of a ring whose puts arrive over TCP.
type ring struct {
	mem   []byte // ctlSize + cells*Cell, 64-byte aligned
	cells uint64 // a power of two
	mask  uint64
}

func ringSize(cells uint64) int { return ctlSize + int(cells)*Cell }

func newRing(mem []byte, cells uint64) (*ring, error) {
	if cells < 4 || cells&(cells-1) != 0 || cells > maxCells {
		return nil, fmt.Errorf("%w: cells must be a power of two from 4 to 2^18, not %d", ErrConfig, cells)
	}
	if len(mem) < ringSize(cells) || uintptr(unsafe.Pointer(&mem[0]))%8 != 0 {
		return nil, fmt.Errorf("%w: ring memory too small or misaligned", ErrConfig)
	}
	return &ring{mem: mem[:ringSize(cells)], cells: cells, mask: cells - 1}, nil
}

func (r *ring) u64(off int) *uint64 { return (*uint64)(unsafe.Pointer(&r.mem[off])) }
func (r *ring) u32(off int) *uint32 { return (*uint32)(unsafe.Pointer(&r.mem[off])) }

// cellOff is the byte offset of absolute cell position pos.
func (r *ring) cellOff(pos uint64) int { return ctlSize + int(pos&r.mask)*Cell }

func (r *ring) pubWord(pos uint64) *uint64 { return r.u64(r.cellOff(pos)) }

// cellsFor is how many cells a message of n payload bytes occupies.
func cellsFor(n int) uint64 { return uint64(headerSize+n+Cell-1) / Cell }

// writeInit stamps the handshake line.
func (r *ring) writeInit(token []byte) {
	binary.LittleEndian.PutUint32(r.mem[offVersion:], formatVersion)
	binary.LittleEndian.PutUint32(r.mem[offCellSize:], Cell)
	binary.LittleEndian.PutUint64(r.mem[offCells:], r.cells)
	copy(r.mem[offToken:offToken+tokenSize], token)
	atomic.StoreUint64(r.u64(offMagic), magic) // last: a peer that sees the magic sees the rest
}

// checkInit verifies the handshake line against what the peer was told.
func (r *ring) checkInit(token []byte) error {
	if atomic.LoadUint64(r.u64(offMagic)) != magic {
		return fmt.Errorf("%w: not an rrefkit fifo region", ErrAuth)
	}
	if v := binary.LittleEndian.Uint32(r.mem[offVersion:]); v != formatVersion {
		return fmt.Errorf("%w: format version %d, want %d", ErrAuth, v, formatVersion)
	}
	if s := binary.LittleEndian.Uint32(r.mem[offCellSize:]); s != Cell {
		return fmt.Errorf("%w: %d-byte cells, want %d", ErrAuth, s, Cell)
	}
	if c := binary.LittleEndian.Uint64(r.mem[offCells:]); c != r.cells {
		return fmt.Errorf("%w: %d cells, want %d", ErrAuth, c, r.cells)
	}
	if string(r.mem[offToken:offToken+tokenSize]) != string(token) {
		return fmt.Errorf("%w: wrong token", ErrAuth)
	}
	return nil
}

// seqAfter is the sequence number after s. Its low 24 bits, the header's
// field, are never 0: the receiver clears the words of cells it consumed
// that later laps may use as headers (clearInner), and a cleared word must
// never match the message due there.
func seqAfter(s uint32) uint32 {
	s++
	if s&seqMask == 0 {
		s++
	}
	return s
}

// clearInner clears the first word of every cell but the first of the
// message at pos, which spans n cells, once the receiver has read it and
// before it returns their credits. Those words held payload (or, inside a
// pad, whatever an earlier lap left) and a later lap may expect a header
// in any of them: a stale word that happened to carry the sequence due
// there would be taken for a message never sent. A header cell needs no
// clearing: its word holds the sequence just taken, and the next one due
// there is less than a lap, far less than 2^24 messages, later.
func (r *ring) clearInner(pos uint64, n uint64) {
	for i := uint64(1); i < n; i++ {
		atomic.StoreUint64(r.pubWord(pos+i), 0)
	}
}

// header is a decoded message header.
type header struct {
	seq, length, credit uint32
	kind, flags         uint8
}

func (h header) pack() uint64 {
	return uint64(h.seq&seqMask) | uint64(h.kind&3)<<24 | uint64(h.flags&1)<<26 | uint64(h.length&maxLength)<<27 | uint64(h.credit&creditMask)<<48
}

func unpack(w uint64) header {
	return header{seq: uint32(w & seqMask), kind: uint8(w>>24) & 3, flags: uint8(w>>26) & 1,
		length: uint32(w>>27) & maxLength, credit: uint32(w >> 48)}
}

// immediateWord is the header word of a one-cell data message carrying the
// sender's receive progress: pack for the direct send path, in registers.
func immediateWord(seq uint32, length int, credit uint32) uint64 {
	return uint64(seq&seqMask) | kindData<<24 | flagCredit<<26 | uint64(length)<<27 | uint64(credit&creditMask)<<48
}

// immediateLength reports the length of the message whose header word is w
// if it is a one-cell data message carrying a credit, which the direct
// receive path takes; anything else goes to the checked general path.
func immediateLength(w uint64) (uint32, bool) {
	const kindFlags = 3<<24 | 1<<26
	length := uint32(w>>27) & maxLength
	return length, w&kindFlags == kindData<<24|flagCredit<<26 && length <= Immediate
}

// cells is how many cells the message whose header is h occupies.
func (h header) cells() uint64 {
	if h.kind == kindPad {
		return uint64(h.length)
	}
	return cellsFor(int(h.length))
}

// place writes a message's cells at pos except its publication word: the
// payload with plain copies, then the credit, kind and flags. The caller
// publishes with publish(pos, ...) after every byte is in place.
func (r *ring) place(pos uint64, h header, payload []byte) {
	copy(r.mem[r.cellOff(pos)+headerSize:], payload)
}

// publish makes the message at pos visible: the one atomic store.
func (r *ring) publish(pos uint64, h header) {
	atomic.StoreUint64(r.pubWord(pos), h.pack())
}

// peek returns the header at pos if message seq is published there.
// A header for a different seq is a cell from an earlier lap: not yet.
func (r *ring) peek(pos uint64, seq uint32) (header, bool) {
	w := atomic.LoadUint64(r.pubWord(pos))
	if uint32(w&seqMask) != seq&seqMask {
		return header{}, false
	}
	return unpack(w), true
}

// validate checks a published header against the ring before any payload is
// read: a hostile or corrupt sender cannot make the reader leave the region.
func (r *ring) validate(pos uint64, h header, maxEager int) error {
	switch h.kind {
	case kindData, kindRdv:
		if int(h.length) > maxEager {
			return &CorruptError{Cell: pos, Why: fmt.Sprintf("length %d above the eager limit %d", h.length, maxEager)}
		}
		if h.kind == kindRdv && h.length != 8 {
			return &CorruptError{Cell: pos, Why: "rendezvous request of the wrong size"}
		}
	case kindPad:
		if h.length == 0 || (pos&r.mask)+uint64(h.length) != r.cells {
			return &CorruptError{Cell: pos, Why: fmt.Sprintf("pad of %d cells does not end at the end of the ring", h.length)}
		}
		return nil
	default:
		return &CorruptError{Cell: pos, Why: fmt.Sprintf("unknown kind %d", h.kind)}
	}
	if n := h.cells(); (pos&r.mask)+n > r.cells {
		return &CorruptError{Cell: pos, Why: fmt.Sprintf("%d cells from cell %d pass the end of the ring", n, pos&r.mask)}
	}
	return nil
}

// payload returns the bytes of the message at pos (aliasing the ring).
func (r *ring) payload(pos uint64, n uint32) []byte {
	off := r.cellOff(pos) + headerSize
	return r.mem[off : off+int(n)]
}
