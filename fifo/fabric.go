package fifo

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync/atomic"
	"time"

	"github.com/rrefkit/rref/generated/fifowire"
	"github.com/rrefkit/rref/genrt"
)

// Provider fabric: libfabric (OFI) RMA writes with remote CQ data, for RDMA
// networks (verbs, EFA, ...) and, through libfabric's software providers
// (net, tcp;ofi_rxm), for any network.
//
// It is built only on request, as it needs cgo and libfabric
// (Debian: libfabric-dev): go build -tags rreffabric. Without the tag,
// DialFabric, AcceptFabric and FabricProviders return ErrNoFabric.
//
// A connection starts over tcp: the handshake (handshake.go, transport
// "fabric") proves the group secret, then each end opens a reliable
// datagram endpoint (FI_EP_RDM), registers its memory and sends the other a
// card: its provider, its fabric address and, for the regions the peer
// may reach, their addresses and keys. Each end registers
//
//	rx region   remote write   a signal line, then its receive ring (ring.go's layout)
//	tx bulk     remote read    the rendezvous slots its large messages wait in
//
// and, for its own operations, the image of the peer's ring it sends from
// and a buffer it reads rendezvous payloads into. The tcp connection stays
// open for the connection's life: its end tells a peer's death at once (a
// killed process's socket is closed by its kernel), and a close is said on
// it as well as over the fabric.
//
// A put is the paper's: the sender copies the message into its image of
// the peer's ring and writes the cells to the same place in the peer's
// ring (one RMA write, inline for a one-cell message), with remote CQ data.
// Over libfabric's shm provider (splitsSafely), a put a little larger
// than the inject size goes as up to maxInjectSplit injects, the last with
// the CQ data, the endpoint asking for writes in the order issued
// (FI_ORDER_WAW): an inject is copied at once, where a larger write waits
// for the peer's progress and then for its own completion.
// The header word travels with the cells but with a sequence number of 0,
// which no message ever has (seqAfter), so a receiver polling its ring
// cannot take a message whose bytes are still landing; the peer's
// completion, the remote event, says which cell the write began at, and
// the receiving end then publishes the word with its sequence number, in
// ring order (fabricRx), with the one atomic store of the other providers.
// From there the receive path is the common one.
//
// Remote CQ data is 32 bits (the least a provider offers): a signal's kind
// in the top 3 bits, its argument below.
//
//	put      the cell index at which the write began
//	credit   cells consumed, mod 2^29 (an explicit credit return)
//	finish   the rendezvous slot the receiver has read (the slot is free)
//	beat     a heartbeat
//	close    the sender closed
//
// Signals other than puts write 8 bytes to the peer's signal line, which
// no one reads. A large message takes the rendezvous channel as the paper
// describes it: a request on the ring names a bulk slot, the receiver
// reads the payload with an RMA read, then sends the finish.
//
// A progress goroutine per connection reads the completion queue, which
// also drives the providers that progress only when called (manual
// progress): it spins briefly after each event, then blocks in the queue.
// A receiver that comes to wait meanwhile reads the queue itself: it ends
// the goroutine's blocking wait (fi_cq_signal) and takes over, since a
// message that ended the wait would reach it only after two wake-ups.
// Whoever reads the queue yields to Go's scheduler every few dozen polls:
// a goroutine that only polls through cgo looks to the runtime's monitor
// like one that never stops, and the monitor's wake-ups then cost a
// spinning end its processor. A large message is copied into its slot in
// chunks, the queue read between them, because over shm the peer's read
// of an earlier slot completes only as this end makes progress.
// It sends a heartbeat every Config.Heartbeat; a peer whose signals stop
// for Config.DeadAfter is dead.

// ErrNoFabric is returned by the fabric provider's functions in a build
// without it (build with -tags rreffabric, cgo and libfabric).
var ErrNoFabric = errors.New("fifo: built without the libfabric provider (build with -tags rreffabric; needs cgo and libfabric)")

// FabricOption is an option of DialFabric and AcceptFabric.
type FabricOption func(*fabricOptions)

type fabricOptions struct {
	provider string // libfabric's name, "" for its first choice
	node     string // the address the endpoint binds to; "" for the tcp connection's local one
	timeout  time.Duration
}

// WithProvider names the libfabric provider to use, as fi_info lists it
// ("verbs;ofi_rxm", "efa", "net", "tcp;ofi_rxm", ...). By default it is
// libfabric's first choice among those that offer what the connection
// needs, skipping tcp;ofi_rxm, sockets and shm (see fabricAvoid: groups
// that failed to start, remote CQ data before its data, one host only); a
// named one is used as named. Both ends must use the same provider: a
// difference is refused by name.
func WithProvider(name string) FabricOption { return func(o *fabricOptions) { o.provider = name } }

// WithFabricNode names the local address the fabric endpoint binds to
// (an IP address for the tcp, sockets and verbs providers). By default it
// is the local address of the tcp connection the handshake ran over, so
// the fabric runs on the interface that reaches the peer.
func WithFabricNode(addr string) FabricOption { return func(o *fabricOptions) { o.node = addr } }

func fabricOptionsOf(opts []FabricOption) fabricOptions {
	o := fabricOptions{timeout: handshakeTimeout}
	for _, f := range opts {
		f(&o)
	}
	return o
}

// FabricProviders lists the libfabric providers on this host that offer
// what the fabric provider needs (reliable datagram endpoints, RMA reads
// and writes with remote CQ data, thread safety), in libfabric's order of
// preference.
func FabricProviders() ([]string, error) { return fabricProviders() }

// DefaultFabricProvider is the provider DialFabric and AcceptFabric use
// without WithProvider: the first of FabricProviders that has not failed
// under this package's traffic (see the package's documentation), or ""
// when all have and libfabric chooses.
func DefaultFabricProvider() (string, error) {
	if err := fabricAvailable(); err != nil {
		return "", err
	}
	return defaultProvider(), nil
}

// DialFabric connects to a peer accepting with AcceptFabric at addr (a tcp
// address) and runs the handshake, as DialTCP does, then moves the
// connection onto the fabric. A refusal (a wrong secret or geometry, another
// provider) wraps ErrAuth; a host without a usable provider gets
// libfabric's reason.
func DialFabric(ctx context.Context, addr string, secret []byte, cfg Config, opts ...FabricOption) (*Conn, error) {
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	o := fabricOptionsOf(opts)
	if err := fabricAvailable(); err != nil {
		return nil, err
	}
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("fifo: dial %s: %w", addr, err)
	}
	end := limit(ctx, nc, o.timeout)
	s := shake{ctx: ctx, nc: nc, peer: addr, secret: secret, cfg: c, transport: "fabric"}
	conn, err := func() (*Conn, error) {
		if _, err := s.dial(); err != nil {
			return nil, err
		}
		if err := s.readVerdict(); err != nil {
			return nil, err
		}
		conn, _, err := fabricBring(ctx, nc, addr, c, o, true)
		return conn, err
	}()
	if eerr := end(); err == nil && eerr != nil {
		conn.Close()
		err = fmt.Errorf("fifo: handshake with %s: %w", addr, eerr)
	}
	if err != nil {
		nc.Close()
		return nil, err
	}
	return conn, nil
}

// AcceptFabric returns one connection from ln (a tcp listener) that passed
// the handshake and moved onto the fabric (see DialFabric). Strays and
// refused dialers are dropped meanwhile, as AcceptTCP drops them; if none
// comes before ctx ends, the error says so. ln stays open.
func AcceptFabric(ctx context.Context, ln net.Listener, secret []byte, cfg Config, opts ...FabricOption) (*Conn, error) {
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	o := fabricOptionsOf(opts)
	if err := fabricAvailable(); err != nil {
		return nil, err
	}
	if _, ok := ln.(deadliner); !ok {
		return nil, fmt.Errorf("%w: AcceptFabric needs a listener whose Accept a deadline interrupts (a *net.TCPListener)", ErrConfig)
	}
	to := tcpOptionsOf(nil)
	to.timeout = o.timeout
	var last atomic.Pointer[error]
	to.refused = func(err error) { last.Store(&err) }
	a := newAcceptor(ln, false, to, func(ctx context.Context, nc net.Conn, progressed func()) (*pending, error) {
		peer := nc.RemoteAddr().String()
		end := limit(ctx, nc, o.timeout)
		s := shake{ctx: ctx, nc: nc, peer: peer, secret: secret, cfg: c, transport: "fabric", progressed: progressed}
		t, err := s.accept()
		if err != nil {
			end()
			return nil, err
		}
		return &pending{conn: nc, raw: nc, peer: peer, t: t, end: end}, nil
	})
	defer a.close()
	for {
		p, err := a.next(ctx)
		if err != nil {
			if l := last.Load(); l != nil {
				return nil, fmt.Errorf("%w (%d refused, the last: %w)", err, a.refused.Load(), *l)
			}
			return nil, err
		}
		local := false
		conn, err := func() (*Conn, error) {
			if _, err := p.conn.Write([]byte{verdictAccepted}); err != nil {
				return nil, fmt.Errorf("fifo: handshake with %s: %w", p.peer, err)
			}
			var conn *Conn
			var err error
			conn, local, err = fabricBring(ctx, p.conn, p.peer, c, o, false)
			return conn, err
		}()
		if local {
			p.drop()
			return nil, err // this host's fabric failed: no dialer will do better
		}
		if err == nil {
			if err = p.finish(); err != nil {
				conn.Close()
			}
		}
		if err == nil {
			return conn, nil
		}
		p.drop()
		a.refuse(err)
		last.Store(&err)
	}
}

// fabricSHM is libfabric's shared-memory provider, whose endpoints are
// named on one host rather than at a network address.
const fabricSHM = "shm"

// fabricEndpoint is an opened endpoint with its memory registered, before
// it knows its peer.
type fabricEndpoint interface {
	card() fabricCard
	// connect makes the connection to peer, checks that it carries a
	// signal both ways (bounded by ctx) and hands it watch, the tcp
	// connection, to watch. The dialer signals first, the acceptor only
	// once it has heard the dialer, so that a provider that connects on
	// first use makes one connection, not two at once from both ends. On
	// error the endpoint is closed.
	connect(ctx context.Context, peer fabricCard, watch net.Conn, dialer bool) (*Conn, error)
	close()
}

// fabricBring opens this end's endpoint, swaps cards with the peer over nc
// and connects. local says the error was opening this end's endpoint.
func fabricBring(ctx context.Context, nc net.Conn, peer string, c Config, o fabricOptions, dialer bool) (_ *Conn, local bool, _ error) {
	node := o.node
	prov := o.provider
	if prov == "" {
		prov = defaultProvider()
	}
	// A network provider binds where the tcp connection arrived; shm's
	// addresses are names on this host, and libfabric 1.17's shm crashes
	// (SIGSEGV in fi_getinfo) when given an IP address as its source.
	if prov == fabricSHM && node != "" {
		return nil, true, fmt.Errorf("fifo: libfabric's shm provider is named on this host, not at a network address: WithFabricNode(%q) does not apply to it", node)
	}
	if node == "" && prov != fabricSHM {
		if ta, ok := nc.LocalAddr().(*net.TCPAddr); ok {
			node = ta.IP.String()
		}
	}
	ep, err := openFabric(o.provider, node, c)
	if err != nil {
		return nil, true, err
	}
	mine := ep.card()
	theirs, err := swapCards(nc, mine, peer)
	if err == nil && theirs.provider != mine.provider {
		err = fmt.Errorf("%w: %s uses libfabric provider %q, this end %q (WithProvider)", ErrAuth, peer, theirs.provider, mine.provider)
	}
	if err != nil {
		ep.close()
		return nil, false, err
	}
	conn, err := ep.connect(ctx, theirs, nc, dialer)
	return conn, false, err
}

// fabricCard is what an end tells its peer after the handshake, over the
// tcp connection: a length (u16, little-endian), then the FabricCard
// message of spec/fifowire.rspec as a frame of its generated codec: the
// provider's name, the fabric address, and the two regions' remote
// addresses and keys. ring and bulk are what the peer passes as the remote address of its
// RMA operations: the regions' addresses, or 0 for providers that address
// registered memory by offset.
type fabricCard struct {
	provider      string
	addr          []byte
	ring, ringKey uint64
	bulk, bulkKey uint64
}

const maxFabricAddr = 1024 // bytes: libfabric addresses are tens of bytes (verbs, tcp), EFA's 32

// maxFabricCard bounds a card's frame: its version and code, a provider
// name and an address at their bounds with their lengths, four regions.
const maxFabricCard = 2 + (2 + maxProviderName) + (2 + maxFabricAddr) + 4*8

// maxProviderName bounds a card's provider name: libfabric's names are a
// few words ("tcp;ofi_rxm").
const maxProviderName = 255

func (c *fabricCard) append(b []byte) []byte {
	frame := fifowire.AppendFrame(nil, &fifowire.FabricCard{Provider: c.provider, Addr: c.addr,
		Ring: c.ring, RingKey: c.ringKey, Bulk: c.bulk, BulkKey: c.bulkKey})
	b = binary.LittleEndian.AppendUint16(b, uint16(len(frame)))
	return append(b, frame...)
}

// parseFabricCard parses a card's body (after its length): the FabricCard
// message of spec/fifowire.rspec, its codec generated.
func parseFabricCard(b []byte, peer string) (fabricCard, error) {
	bad := func(why string) (fabricCard, error) {
		return fabricCard{}, fmt.Errorf("%w: %s sent a malformed fabric card: %s", ErrAuth, peer, why)
	}
	m, err := fifowire.Decode(b, &genrt.Limits{MaxFrame: maxFabricCard, MaxBytes: maxFabricAddr})
	if err != nil {
		return bad(err.Error())
	}
	card, ok := m.(*fifowire.FabricCard)
	if !ok {
		return bad(fmt.Sprintf("a %v where a card belongs", m.MessageCode()))
	}
	if len(card.Provider) > maxProviderName {
		return bad(fmt.Sprintf("a provider name of %d bytes", len(card.Provider)))
	}
	if n := len(card.Addr); n == 0 || n > maxFabricAddr {
		return bad(fmt.Sprintf("address of %d bytes", n))
	}
	return fabricCard{provider: card.Provider, addr: append([]byte(nil), card.Addr...),
		ring: card.Ring, ringKey: card.RingKey, bulk: card.Bulk, bulkKey: card.BulkKey}, nil
}

// swapCards sends mine and reads the peer's; both ends write first, as a
// card fits any socket buffer.
func swapCards(nc net.Conn, mine fabricCard, peer string) (fabricCard, error) {
	if _, err := nc.Write(mine.append(nil)); err != nil {
		return fabricCard{}, fmt.Errorf("fifo: fabric card to %s: %w", peer, err)
	}
	var l [2]byte
	if _, err := io.ReadFull(nc, l[:]); err != nil {
		return fabricCard{}, fmt.Errorf("fifo: fabric card from %s: %w", peer, err)
	}
	n := int(binary.LittleEndian.Uint16(l[:]))
	if n > maxFabricCard {
		return fabricCard{}, fmt.Errorf("%w: %s sent a fabric card of %d bytes", ErrAuth, peer, n)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(nc, b); err != nil {
		return fabricCard{}, fmt.Errorf("fifo: fabric card from %s: %w", peer, err)
	}
	return parseFabricCard(b, peer)
}

// Signals: remote CQ data, 32 bits.
const (
	sigShift  = 29
	sigArg    = 1<<sigShift - 1
	sigPut    = 1
	sigCredit = 2
	sigFinish = 3
	sigBeat   = 4
	sigClose  = 5

	// sigLine is the rx region's first line, where signals other than puts
	// write their 8 ignored bytes; the ring follows it.
	sigLine = Cell

	// the byte on the tcp connection that says its sender closed (its
	// absence before the end: the sender died)
	fabricCloseByte = 'C'
)

func signal(kind, arg uint32) uint64 { return uint64(kind)<<sigShift | uint64(arg&sigArg) }

// fabricRx applies the peer's puts to the receive ring. The peer's writes
// land in any order its provider completes them; each names the cell it
// began at. A message is published, with its sequence number, once every
// message before it in the ring has been: in ring order, as the receiver
// takes them. Everything a peer wrote is checked before it is published:
// a put signalled twice, a header that published itself, a message past
// the credits given or out of the ring, are a corrupt peer.
type fabricRx struct {
	r        *ring
	eager    int
	nextPos  uint64
	nextSeq  uint32
	landed   []bool        // by cell index: a put began there and is not yet published
	consumed func() uint64 // how far this end's receiver has consumed (at least what the peer was told)
}

func newFabricRx(r *ring, eager int, consumed func() uint64) *fabricRx {
	return &fabricRx{r: r, eager: eager, nextSeq: 1, landed: make([]bool, r.cells), consumed: consumed}
}

// put records a put that began at cell idx and publishes what became
// ready. It reports whether it published anything.
func (x *fabricRx) put(idx uint32) (bool, error) {
	if uint64(idx) >= x.r.cells {
		return false, &CorruptError{Cell: uint64(idx), Why: "put signalled outside the ring"}
	}
	if x.landed[idx] {
		return false, &CorruptError{Cell: uint64(idx), Why: "two puts signalled at one cell"}
	}
	x.landed[idx] = true
	published := false
	for {
		pos := x.nextPos
		i := pos & x.r.mask
		if !x.landed[i] {
			return published, nil
		}
		w := atomic.LoadUint64(x.r.pubWord(pos))
		if w&seqMask != 0 {
			return published, &CorruptError{Cell: pos, Why: "a put's header carries a sequence number: only the receiver publishes"}
		}
		h := unpack(w)
		if err := x.r.validate(pos, h, x.eager); err != nil {
			return published, err
		}
		n := h.cells()
		if pos+n-x.consumed() > x.r.cells {
			return published, &CorruptError{Cell: pos, Why: "the sender overran its credits"}
		}
		x.landed[i] = false
		h.seq = x.nextSeq
		x.r.publish(pos, h)
		x.nextPos, x.nextSeq = pos+n, seqAfter(x.nextSeq)
		published = true
	}
}

// extendCredit widens an explicit credit return (cells consumed, mod
// 2^29) against known. The true value is never more than a ring (2^18
// cells) ahead of any value sent before it, so a value that would be
// further ahead is an older return overtaken by a newer one, and ignored.
func extendCredit(known uint64, arg uint32) uint64 {
	d := (uint64(arg) - known) & sigArg
	if d == 0 || d > 1<<(sigShift-1) {
		return known
	}
	return known + d
}
