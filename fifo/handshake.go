package fifo

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"time"

	"github.com/rrefkit/rref/generated/fifowire"
)

// The handshake opens every tcp connection (over TLS when it is
// configured) and every shared-memory hand-over, before any ring traffic.
// It is a mutual challenge-response over the group secret: the secret
// itself never travels, not even hashed, so a recorded handshake is
// worthless to replay and a listener that does not know the secret learns
// nothing from a dialer but a fresh nonce.
//
//	dialer                                  acceptor
//	hello (its nonce Nd)              --->
//	                                  <---  hello (its nonce Na), acceptor proof
//	dialer proof                      --->
//	                                  <---  verdict (shm: with the memfd, SCM_RIGHTS)
//	(shm) attached                    --->
//
// Every message has a fixed size, little endian. A hello (96 bytes) is the
// layout Hello of spec/fifowire.rspec, its codec generated
// (generated/fifowire, where its bytes are drawn): the ring geometry
// (Config.Cells, EagerLimit, MaxMessage, BulkSlots: tcp refuses more
// rendezvous in flight), the ring format's and the handshake's versions, a
// nonce fresh from crypto/rand, flags (bit 0: this end keeps the
// connection's session, as a tcp dialer that re-dials and a listener that
// routes re-dials to it do: the connection resumes after a break when both
// ends set it), and the session a dialer's re-dial resumes (else 0).
//
// A proof (32 bytes) is HMAC-SHA256 keyed with the secret over
//
//	"rrefkit fifo " transport " " role, a zero byte,
//	the dialer's hello, the acceptor's hello, the channel binding
//
// with transport "tcp" or "shm", role "dialer" or "acceptor", and as
// channel binding, under TLS, 32 bytes exported from the TLS session
// (nothing otherwise). Both hellos carry the geometry and both nonces, so
// a proof holds for this one connection only; the role keeps a proof from
// being reflected to its maker; the binding keeps one TLS session's
// handshake from being relayed into another. The acceptor proves first: a
// dialer gives its own proof only to a peer that knows the secret. The
// verdict is one byte, 0 when the acceptor accepted, sent only when an
// Accept takes the connection (a dialer whose connection was abandoned
// sees it closed, not accepted). A dialer that finds the acceptor's proof
// wrong sends an empty (all-zero) proof, so that the acceptor can say the
// secrets differ. The shm dialer answers the memfd with one byte, 0, once
// it has checked and mapped it.
//
// A connection whose ends both keep sessions has a session id, the first
// 16 bytes of HMAC-SHA256 keyed with the secret over "rrefkit fifo tcp
// session", a zero byte, the transcript and the binding: both ends compute
// it, and neither sends it until a re-dial. A re-dial runs the same
// handshake with the session in the dialer's hello, so the proofs cover
// it; the listener answers verdict 2 for a session it does not hold (it
// restarted, or has declared the dialer dead): the dialer is fenced.
//
// Each end compares the other's hello with its own configuration first, and
// says which field differs: the geometry is not secret, and a mismatch is
// the usual mistake. An acceptor answers a hello of another geometry with
// its own hello and an empty proof, so the dialer can say the same, and
// answers anything that is not a hello with nothing.
const (
	helloSize   = fifowire.SizeHello // 96
	sessionSize = 16
	nonceSize   = 32
	proofSize   = sha256.Size
	bindingLen  = 32 // bytes exported from a TLS session for the channel binding

	// handshakeVersion 1 sent sha256(secret) in the clear; 2 is the
	// challenge-response above; 3 adds sessions (resumable tcp); 4 sends
	// the fabric card as a generated frame (spec/fifowire.rspec).
	handshakeVersion = 4

	verdictAccepted       = 0
	verdictRefused        = 1
	verdictUnknownSession = 2

	helloKeepsSessions = 1 // hello flags bit 0

	// handshakeTimeout bounds a whole handshake, TLS included. Members on
	// one host or network finish in well under a millisecond, across
	// continents in a few round trips of a few hundred; a peer still
	// silent after 5 s is a stray or half-open, and a listener frees its
	// slot for the next connection.
	handshakeTimeout = 5 * time.Second

	tlsExporterLabel = "EXPORTER-rrefkit-fifo-handshake"
)

// hello is a decoded hello: its layout is declared in spec/fifowire.rspec
// and its codec generated (generated/fifowire), so that the bytes the
// proofs cover are laid out in one place.
type hello = fifowire.Hello

// sessionID names a resumable tcp connection (see above).
type sessionID [sessionSize]byte

func helloFor(cfg Config, nonce []byte) hello {
	h := hello{Magic: magic, Version: formatVersion, CellSize: Cell, Cells: cfg.Cells,
		Eager: uint32(cfg.EagerLimit), MaxMessage: uint32(cfg.MaxMessage), BulkSlots: uint32(cfg.BulkSlots),
		HandshakeVersion: handshakeVersion}
	copy(h.Nonce[:], nonce)
	return h
}

func keepsSessions(h *hello) bool { return h.Flags&helloKeepsSessions != 0 }

// appendHello appends this end's hello for cfg (with its defaults) and nonce.
func appendHello(b []byte, cfg Config, nonce []byte) []byte {
	h := helloFor(cfg, nonce)
	return fifowire.AppendHello(b, &h)
}

// parseHello decodes a hello received from peer. Only the length and the
// magic are checked here; helloMatches compares the rest with this end's.
func parseHello(b []byte, peer string) (hello, error) {
	if len(b) != helloSize {
		return hello{}, fmt.Errorf("%w: %s sent a hello of %d bytes, want %d", ErrAuth, peer, len(b), helloSize)
	}
	h, _, err := fifowire.ConsumeHello(b)
	if err != nil {
		return hello{}, fmt.Errorf("%w: %s sent a hello that does not decode: %w", ErrAuth, peer, err)
	}
	if h.Magic != magic {
		return hello{}, fmt.Errorf("%w: %s is not an rrefkit fifo peer", ErrAuth, peer)
	}
	return h, nil
}

// helloMatches reports the first field of the peer's hello h that differs
// from this end's configuration cfg.
func helloMatches(h *hello, cfg Config, peer string) error {
	field := func(what string, got, want uint64) error {
		return fmt.Errorf("%w: %s has %s %d, this end %d", ErrAuth, peer, what, got, want)
	}
	switch {
	case h.Version != formatVersion:
		return field("ring format version", uint64(h.Version), formatVersion)
	case h.HandshakeVersion != handshakeVersion:
		return field("handshake version", uint64(h.HandshakeVersion), handshakeVersion)
	case h.CellSize != Cell:
		return field("cell size", uint64(h.CellSize), Cell)
	case h.Cells != cfg.Cells:
		return field("Cells", h.Cells, cfg.Cells)
	case h.Eager != uint32(cfg.EagerLimit):
		return field("EagerLimit", uint64(h.Eager), uint64(cfg.EagerLimit))
	case h.MaxMessage != uint32(cfg.MaxMessage):
		return field("MaxMessage", uint64(h.MaxMessage), uint64(cfg.MaxMessage))
	case h.BulkSlots != uint32(cfg.BulkSlots):
		return field("BulkSlots", uint64(h.BulkSlots), uint64(cfg.BulkSlots))
	case h.Flags&^helloKeepsSessions != 0 || h.Reserved != 0:
		return fmt.Errorf("%w: %s sets hello flags %#x this end does not know", ErrAuth, peer, h.Flags)
	}
	return nil
}

// transcript is both hellos as sent, the dialer's first: what the proofs
// and a shared-memory region's token are computed over.
type transcript [2 * helloSize]byte

// mac is HMAC-SHA256 keyed with secret over label, a zero byte, the
// transcript and the binding.
func mac(secret []byte, label string, t *transcript, binding []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(label))
	m.Write([]byte{0})
	m.Write(t[:])
	m.Write(binding)
	return m.Sum(nil)
}

func proofOf(secret []byte, transport, role string, t *transcript, binding []byte) []byte {
	return mac(secret, "rrefkit fifo "+transport+" "+role, t, binding)
}

// sessionOf is the session id of a connection both of whose ends keep
// sessions.
func sessionOf(secret []byte, t *transcript, binding []byte) sessionID {
	var id sessionID
	copy(id[:], mac(secret, "rrefkit fifo tcp session", t, binding))
	return id
}

// regionToken is what a shared-memory listener stamps in both rings' first
// lines, and its dialer checks: proof that the segment was made for this
// handshake.
func regionToken(secret []byte, t *transcript) []byte {
	return mac(secret, "rrefkit fifo shm region", t, nil)[:tokenSize]
}

// shake is one end of a handshake in progress on nc.
type shake struct {
	ctx       context.Context
	nc        net.Conn
	peer      string // for errors: the peer's address, or "pid N"
	secret    []byte
	cfg       Config
	transport string // "tcp" or "shm"
	binding   []byte
	tls       bool // nc is a TLS connection: a failing read may be a TLS refusal
	// keeps says this end keeps sessions (hello flag); resume is the
	// session a dialer re-dials (zero: a new connection).
	keeps  bool
	resume sessionID
	// peerHello is the other end's hello, once read.
	peerHello hello
	// progressed, when set, hears that the accepting end (accept) read a
	// well-formed hello of its geometry: the peer is no silent stray (see
	// admission). A dialer has no use for it.
	progressed func()
}

// ownHello is this end's hello with nonce.
func (s *shake) ownHello(nonce []byte) hello {
	h := helloFor(s.cfg, nonce)
	if s.keeps {
		h.Flags |= helloKeepsSessions
	}
	h.Session = s.resume
	return h
}

// session is the connection's session id, and whether it has one: both
// ends keep sessions (after a completed handshake).
func (s *shake) session(t *transcript) (sessionID, bool) {
	if !s.keeps || !keepsSessions(&s.peerHello) {
		return sessionID{}, false
	}
	if s.resume != (sessionID{}) {
		return s.resume, true
	}
	return sessionOf(s.secret, t, s.binding), true
}

// dial is the dialer's side, up to and including its proof; the caller
// reads the verdict (shm: with the memfd).
func (s *shake) dial() (*transcript, error) {
	var t transcript
	var nonce [nonceSize]byte
	rand.Read(nonce[:]) // never fails (crypto/rand)
	h := s.ownHello(nonce[:])
	copy(t[:helloSize], fifowire.AppendHello(nil, &h))
	if err := s.write(t[:helloSize], "hello"); err != nil {
		return nil, err
	}
	if err := s.read(t[helloSize:], "hello"); err != nil {
		return nil, err
	}
	peer, err := parseHello(t[helloSize:], s.peer)
	if err != nil {
		return nil, err
	}
	if err := helloMatches(&peer, s.cfg, s.peer); err != nil {
		return nil, err
	}
	if peer.Nonce == h.Nonce {
		return nil, fmt.Errorf("%w: %s reflected this end's hello", ErrAuth, s.peer)
	}
	s.peerHello = peer
	var got [proofSize]byte
	if err := s.read(got[:], "proof"); err != nil {
		return nil, err
	}
	if !hmac.Equal(got[:], proofOf(s.secret, s.transport, "acceptor", &t, s.binding)) {
		// An empty proof in place of ours tells the acceptor why we leave.
		s.nc.Write(make([]byte, proofSize))
		return nil, fmt.Errorf("%w: %s does not prove the group secret (another secret, or not a member)", ErrAuth, s.peer)
	}
	if err := s.write(proofOf(s.secret, s.transport, "dialer", &t, s.binding), "proof"); err != nil {
		return nil, err
	}
	return &t, nil
}

// accept is the acceptor's side, up to checking the dialer's proof; the
// caller sends the verdict once the connection is taken. A wrong proof is
// answered with a refusal.
func (s *shake) accept() (*transcript, error) {
	var t transcript
	if err := s.read(t[:helloSize], "hello"); err != nil {
		return nil, err
	}
	peer, err := parseHello(t[:helloSize], s.peer)
	if err != nil {
		return nil, err // not a hello: no answer
	}
	var nonce [nonceSize]byte
	rand.Read(nonce[:])
	h := s.ownHello(nonce[:])
	copy(t[helloSize:], fifowire.AppendHello(nil, &h))
	if err := helloMatches(&peer, s.cfg, s.peer); err != nil {
		// Tell the dialer our geometry, so that it can say what differs;
		// an empty proof, since no proof would hold.
		var b [helloSize + proofSize]byte
		copy(b[:], t[helloSize:])
		s.nc.Write(b[:])
		return nil, err
	}
	if peer.Nonce == h.Nonce {
		return nil, fmt.Errorf("%w: %s reflected this end's hello", ErrAuth, s.peer)
	}
	if s.progressed != nil {
		s.progressed()
	}
	s.peerHello = peer
	msg := append(t[helloSize:], proofOf(s.secret, s.transport, "acceptor", &t, s.binding)...)
	if err := s.write(msg, "hello"); err != nil {
		return nil, err
	}
	var got [proofSize]byte
	if err := s.read(got[:], "proof"); err != nil {
		return nil, err
	}
	if got == [proofSize]byte{} {
		return nil, fmt.Errorf("%w: %s found this end's proof wrong: the secrets differ", ErrAuth, s.peer)
	}
	if !hmac.Equal(got[:], proofOf(s.secret, s.transport, "dialer", &t, s.binding)) {
		s.nc.Write([]byte{verdictRefused})
		return nil, fmt.Errorf("%w: %s does not prove the group secret (another secret, or a replayed handshake)", ErrAuth, s.peer)
	}
	return &t, nil
}

// readVerdict reads the acceptor's verdict (tcp).
func (s *shake) readVerdict() error {
	var v [1]byte
	if err := s.read(v[:], "verdict"); err != nil {
		return err
	}
	switch v[0] {
	case verdictAccepted:
	case verdictUnknownSession:
		return fmt.Errorf("%w: %s no longer holds this connection's session (it restarted, or found this end dead)", errUnknownSession, s.peer)
	default:
		return fmt.Errorf("%w by %s: it does not accept this end's proof", ErrAuth, s.peer)
	}
	return nil
}

func (s *shake) read(b []byte, what string) error {
	n, err := io.ReadFull(s.nc, b)
	if err != nil {
		return s.ioErr(err, n, len(b), what)
	}
	return nil
}

func (s *shake) write(b []byte, what string) error {
	if _, err := s.nc.Write(b); err != nil {
		return s.ioErr(err, 0, len(b), what)
	}
	return nil
}

// ioErr says why reading (n of want bytes of the peer's what) or writing
// failed. Only a refusal wraps ErrAuth: a peer that closed before saying
// anything, or timed out, may be a busy listener worth dialing again; one
// that stopped in the middle of a message, or a TLS peer that refused this
// end, will refuse again.
func (s *shake) ioErr(err error, n, want int, what string) error {
	if cerr := s.ctx.Err(); cerr != nil {
		if errors.Is(cerr, context.DeadlineExceeded) {
			return fmt.Errorf("fifo: handshake with %s: no %s in time: %w", s.peer, what, cerr)
		}
		return fmt.Errorf("fifo: handshake with %s: %w", s.peer, cerr)
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return fmt.Errorf("fifo: handshake with %s: no %s in time: %w", s.peer, what, err)
	}
	if n > 0 && s.resume == (sessionID{}) {
		return fmt.Errorf("%w: %s stopped %d bytes into its %d-byte %s (another protocol or version?): %v", ErrAuth, s.peer, n, want, what, err)
	}
	if n > 0 {
		// A re-dial: the peer spoke this protocol on the session's first
		// connection, so a cut in the middle is the network breaking
		// again, worth another dial within DeadAfter, not a refusal.
		return fmt.Errorf("fifo: handshake with %s: cut %d bytes into its %d-byte %s: %w", s.peer, n, want, what, err)
	}
	if s.tls && tlsRefusal(err) {
		return fmt.Errorf("%w: %s refused this end in TLS: %v", ErrAuth, s.peer, err)
	}
	return fmt.Errorf("fifo: handshake with %s: %w", s.peer, err)
}

// tlsRefusal reports whether err is the peer's TLS alert, as when it
// rejects this end's certificate; anything else, a closed connection say,
// is only a failed connection.
func tlsRefusal(err error) bool {
	var oe *net.OpError
	return errors.As(err, &oe) && oe.Op == "remote error"
}

// transient reports whether a failed TLS handshake may succeed if tried
// again: the connection closed, reset or timed out, rather than a
// certificate or protocol being refused.
func transient(err error) bool {
	var ne net.Error
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) ||
		(errors.As(err, &ne) && ne.Timeout())
}

// tlsHandshake runs tc's TLS handshake, bounded as the rest (the
// connection's deadline is set) and returns the channel binding.
func tlsHandshake(ctx context.Context, tc *tls.Conn, peer string) ([]byte, error) {
	if err := tc.HandshakeContext(ctx); err != nil {
		if cerr := ctx.Err(); cerr != nil {
			return nil, fmt.Errorf("fifo: tls handshake with %s: %w", peer, cerr)
		}
		if transient(err) {
			return nil, fmt.Errorf("fifo: tls handshake with %s: %w", peer, err)
		}
		return nil, fmt.Errorf("%w: tls with %s: %v", ErrAuth, peer, err)
	}
	st := tc.ConnectionState()
	b, err := st.ExportKeyingMaterial(tlsExporterLabel, nil, bindingLen)
	if err != nil { // TLS 1.3 is required (tlsConfig), which always exports
		return nil, fmt.Errorf("%w: tls with %s exports no keying material: %v", ErrAuth, peer, err)
	}
	return b, nil
}

// tlsConfig is c for a handshake: a copy, at TLS 1.3 at least, whose
// exporter every session supports (the channel binding). A dialer's copy
// names the host it dials when c names none.
func tlsConfig(c *tls.Config, dialAddr string) *tls.Config {
	c = c.Clone()
	if c.MinVersion < tls.VersionTLS13 {
		c.MinVersion = tls.VersionTLS13
	}
	if c.MaxVersion != 0 && c.MaxVersion < tls.VersionTLS13 {
		c.MaxVersion = tls.VersionTLS13
	}
	if dialAddr != "" && c.ServerName == "" {
		if host, _, err := net.SplitHostPort(dialAddr); err == nil {
			c.ServerName = host
		}
	}
	return c
}

// limit bounds a handshake on nc by ctx and by timeout: it sets nc's
// deadline to the earlier of the two, and to the past if ctx is cancelled
// meanwhile, so a blocked read or write returns at once. The returned
// function ends the bound: it clears the deadline, or, if ctx ended
// meanwhile (when nc's deadline may have been moved), reports ctx's error.
func limit(ctx context.Context, nc net.Conn, timeout time.Duration) (end func() error) {
	dl := time.Now().Add(timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(dl) {
		dl = d
	}
	nc.SetDeadline(dl)
	fired := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		nc.SetDeadline(time.Unix(1, 0))
		close(fired)
	})
	return func() error {
		if !stop() {
			<-fired
			return ctx.Err()
		}
		nc.SetDeadline(time.Time{})
		return nil
	}
}
