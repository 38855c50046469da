package fifo

import (
	"container/list"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// ErrBusy is why a listener closed a connection before its handshake
// ended: every handshake slot (1024) was taken when another connection
// arrived, and this one was the oldest of the handshakes whose peer had
// sent no hello yet, of the source address holding the most of them (see
// admission). A dialer sees the connection closed before any answer and
// may try again.
var ErrBusy = errors.New("fifo: too many handshakes in progress")

// maxPendingHandshakes bounds the handshakes a listener runs at once, and
// so the goroutines, sockets and memory strays can make it hold: each holds
// a goroutine, a socket and a few kilobytes (tens with TLS), some 10-40 MB
// for all at worst. It leaves room for a burst of a thousand strays beside
// the members, whose handshakes take a millisecond. Past it, a new
// connection takes the slot of the oldest silent handshake of the source
// holding the most (see admission).
const maxPendingHandshakes = 1024

// TCPOption is an option of DialTCP or NewTCPListener.
type TCPOption func(*tcpOptions)

type tcpOptions struct {
	tls        *tls.Config
	refused    func(error)
	timeout    time.Duration // handshakeTimeout; shorter in tests
	maxPending int           // maxPendingHandshakes; smaller in tests
}

func tcpOptionsOf(opts []TCPOption) tcpOptions {
	o := tcpOptions{timeout: handshakeTimeout, maxPending: maxPendingHandshakes}
	for _, f := range opts {
		f(&o)
	}
	return o
}

// WithTLS wraps the connection in TLS 1.3 with c before the handshake,
// which still runs inside it (the secret stays the group's barrier, and
// the handshake is bound to the TLS session). A dialer is the TLS client:
// c.RootCAs verifies the listener, c.Certificates holds its own
// certificate for mutual TLS, and c.ServerName defaults to the dialed
// host. A listener is the TLS server: c.Certificates holds its
// certificate, and c.ClientAuth = tls.RequireAndVerifyClientCert with
// c.ClientCAs refuses dialers without a certificate of those authorities.
// c is copied; versions below 1.3 are not offered.
func WithTLS(c *tls.Config) TCPOption {
	return func(o *tcpOptions) { o.tls = c }
}

// WithRefused has a listener call f with the reason for every connection
// it drops: garbage, a wrong secret or geometry, a TLS refusal, a silent
// or half-open connection at the end of the handshake timeout, or ErrBusy.
// f may be called from several goroutines at once, and should return
// quickly; once Close has returned, only an Accept still running may call
// it. A dialer ignores it.
func WithRefused(f func(error)) TCPOption {
	return func(o *tcpOptions) { o.refused = f }
}

// pending is a connection whose dialer has proved the secret, waiting for
// an Accept to take it; its handshake's bound still holds.
type pending struct {
	conn   net.Conn // what the handshake spoke over: raw, or TLS over raw
	raw    net.Conn
	peer   string
	t      *transcript
	end    func() error // ends the bound (limit): the handshake's time ran out if it fails
	cancel context.CancelFunc
	// session names the connection when both ends keep sessions.
	session    sessionID
	hasSession bool
}

// finish ends p's bound; the connection is then the caller's.
func (p *pending) finish() error {
	err := p.end()
	p.cancel()
	return err
}

// drop closes p's connection and ends its bound.
func (p *pending) drop() {
	p.conn.Close()
	p.end()
	p.cancel()
}

// acceptor accepts connections on ln and runs each one's handshake (shake)
// on its own goroutine, at most maxPending at once and each for at most
// timeout, dropping those that fail and handing the others to next.
type acceptor struct {
	ln      net.Listener
	owned   bool // Close closes ln; otherwise it only interrupts Accept with a deadline
	shake   shakeFunc
	timeout time.Duration
	onRef   func(error)
	refused atomic.Uint64

	slots    *admission
	ready    chan *pending // unbuffered: a pending connection is always some goroutine's
	ctx      context.Context
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	loopDone chan struct{} // closed when the accept loop ends; loopErr says why
	loopErr  error

	closeOnce sync.Once
	closeErr  error
}

// deadliner is a listener whose Accept a deadline interrupts
// (*net.TCPListener, *net.UnixListener).
type deadliner interface{ SetDeadline(time.Time) error }

// shakeFunc runs the handshake of nc, calling progressed once the peer has
// sent a well-formed hello.
type shakeFunc func(ctx context.Context, nc net.Conn, progressed func()) (*pending, error)

func newAcceptor(ln net.Listener, owned bool, o tcpOptions, shake shakeFunc) *acceptor {
	a := &acceptor{ln: ln, owned: owned, shake: shake, timeout: o.timeout, onRef: o.refused,
		slots: newAdmission(max(o.maxPending, 1), unreadBytes), ready: make(chan *pending), loopDone: make(chan struct{})}
	a.ctx, a.cancel = context.WithCancel(context.Background())
	a.wg.Add(1)
	go a.loop()
	return a
}

// refuse reports before it counts, so whoever sees Refused reach n has
// also seen the first n reports reach the WithRefused hook.
func (a *acceptor) refuse(err error) {
	if a.onRef != nil {
		a.onRef(err)
	}
	a.refused.Add(1)
}

// Accept errors worth waiting out (as net/http does): out of descriptors
// or buffers, or a connection aborted before it was accepted.
func temporaryAccept(err error) bool {
	var ne net.Error
	return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) || errors.Is(err, syscall.ENOBUFS) ||
		errors.Is(err, syscall.ENOMEM) || errors.Is(err, syscall.ECONNABORTED) || (errors.As(err, &ne) && ne.Timeout())
}

// Backing off after a temporary Accept error: from a millisecond, doubling
// to a second, as net/http does.
const (
	acceptBackoffMin = time.Millisecond
	acceptBackoffMax = time.Second
)

func (a *acceptor) loop() {
	defer a.wg.Done()
	defer close(a.loopDone)
	var backoff time.Duration
	for {
		nc, err := a.ln.Accept()
		if err != nil {
			if a.ctx.Err() != nil {
				a.loopErr = fmt.Errorf("fifo: listener closed: %w", net.ErrClosed)
				return
			}
			if temporaryAccept(err) {
				backoff = min(max(2*backoff, acceptBackoffMin), acceptBackoffMax)
				select {
				case <-time.After(backoff):
					continue
				case <-a.ctx.Done():
					a.loopErr = fmt.Errorf("fifo: listener closed: %w", net.ErrClosed)
					return
				}
			}
			a.loopErr = fmt.Errorf("fifo: accept: %w", err)
			return
		}
		backoff = 0
		s, evicted := a.slots.take(nc)
		if evicted != nil {
			evicted.Close()
			a.refuse(fmt.Errorf("%w: %s closed, its handshake unfinished, for a newer connection", ErrBusy, evicted.RemoteAddr()))
		}
		a.wg.Add(1)
		go a.handshake(s)
	}
}

// admission holds the handshakes in progress, by source address. When all
// max slots are taken, a new connection takes the slot of the oldest
// silent handshake of the source holding the most silent ones, silent
// meaning that its peer has sent no hello yet: neither one its handshake
// read (progressed), nor a hello's worth of bytes waiting unread in its
// socket, which the accept loop looks at before it pushes a handshake out
// (unreadBytes). Only when no handshake is silent does the one heard
// longest ago of the source holding the most go.
//
// So an outsider that opens connections and stays silent (or sends a
// byte a second) only ever pushes out its own, and a member's handshake
// is safe from it once its hello has arrived, however busy the process
// is: whether the handshake's goroutine has run yet does not matter. From
// another host a member's handshake is never the one pushed out; from the
// same host (behind one NAT, say), its hello must arrive before a pool's
// worth of newer connections does, and a member sends it the moment its
// connection is up (under TLS its ClientHello, which counts the same), so
// it is usually there before the listener accepts the connection. Bytes
// that are no hello count only until the handshake reads them and refuses
// the connection. A refusal of the newcomer instead (as once) let such an
// outsider, by redialing each connection the moment it dropped, keep every
// slot and stop members' links from resuming; pushing out the oldest
// whatever it sent (as a bug made it do until the listener marked the
// hellos it read) pushed out members' handshakes waiting for their proofs.
type admission struct {
	mu       sync.Mutex
	max      int
	n        int
	bySource map[string]*source
	// unread reports how many bytes nc's peer sent that no read has taken
	// (0 where it cannot be known): unreadBytes, a stub in tests.
	unread func(nc net.Conn) int
}

// source is one address's handshakes in progress: the silent ones oldest
// first, and those that sent a hello in the order they were heard.
type source struct {
	silent, heard list.List // of *slot
}

func newAdmission(max int, unread func(net.Conn) int) *admission {
	return &admission{max: max, bySource: map[string]*source{}, unread: unread}
}

// slot is one handshake in progress.
type slot struct {
	nc     net.Conn
	source string
	elem   *list.Element // in its source's silent or heard list; nil once it left the pool
	hello  bool          // its peer sent a hello: it is in heard, and pushed out last
}

// sourceOf is the host a connection comes from (its address without the
// port); all of a unix socket's peers are one source.
func sourceOf(nc net.Conn) string {
	addr := nc.RemoteAddr()
	if addr == nil {
		return ""
	}
	host, _, err := net.SplitHostPort(addr.String())
	if err != nil {
		return addr.String()
	}
	return host
}

// take gives nc a slot, and returns the connection whose slot it took, if
// the pool was full (the caller closes it).
func (ad *admission) take(nc net.Conn) (s *slot, evicted net.Conn) {
	s = &slot{nc: nc, source: sourceOf(nc)}
	ad.mu.Lock()
	defer ad.mu.Unlock()
	if ad.n >= ad.max {
		old := ad.victim()
		ad.remove(old)
		evicted = old.nc
	}
	src := ad.bySource[s.source]
	if src == nil {
		src = &source{}
		ad.bySource[s.source] = src
	}
	s.elem = src.silent.PushBack(s)
	ad.n++
	return s, evicted
}

// victim is the slot a newcomer takes (under mu, with every slot taken):
// the oldest silent handshake of the source holding the most silent ones,
// or, with none silent, the one heard longest ago of the source holding
// the most. A silent candidate whose hello is found waiting unread is
// marked heard instead, and the next is looked at: each slot is looked at
// so at most once, and a newcomer costs one look in the usual case.
func (ad *admission) victim() *slot {
	busiest := func(l func(*source) *list.List) *source {
		var top *source
		for _, src := range ad.bySource {
			if n := l(src).Len(); n > 0 && (top == nil || n > l(top).Len()) {
				top = src
			}
		}
		return top
	}
	silent := func(src *source) *list.List { return &src.silent }
	heard := func(src *source) *list.List { return &src.heard }
	for {
		src := busiest(silent)
		if src == nil {
			break
		}
		s := src.silent.Front().Value.(*slot)
		if ad.unread(s.nc) < helloSize {
			return s
		}
		ad.hear(s)
	}
	return busiest(heard).heard.Front().Value.(*slot)
}

// hear moves s, still in the pool, among the handshakes that sent a hello
// (under mu).
func (ad *admission) hear(s *slot) {
	if s.hello || s.elem == nil {
		return
	}
	src := ad.bySource[s.source]
	src.silent.Remove(s.elem)
	s.hello = true
	s.elem = src.heard.PushBack(s)
}

// held counts the slots taken.
func (ad *admission) held() int {
	ad.mu.Lock()
	defer ad.mu.Unlock()
	return ad.n
}

// progressed marks s's peer as one that sent a well-formed hello.
func (ad *admission) progressed(s *slot) {
	ad.mu.Lock()
	ad.hear(s)
	ad.mu.Unlock()
}

// leave takes s out of the pool; false when it was evicted first.
func (ad *admission) leave(s *slot) bool {
	ad.mu.Lock()
	defer ad.mu.Unlock()
	if s.elem == nil {
		return false
	}
	ad.remove(s)
	return true
}

func (ad *admission) remove(s *slot) {
	src := ad.bySource[s.source]
	if s.hello {
		src.heard.Remove(s.elem)
	} else {
		src.silent.Remove(s.elem)
	}
	s.elem = nil
	ad.n--
	if src.silent.Len() == 0 && src.heard.Len() == 0 {
		delete(ad.bySource, s.source)
	}
}

// handshake runs one connection's handshake and hands it to next.
func (a *acceptor) handshake(s *slot) {
	defer a.wg.Done()
	nc := s.nc
	ctx, cancel := context.WithTimeout(a.ctx, a.timeout)
	p, err := a.shake(ctx, nc, func() { a.slots.progressed(s) })
	// Done shaking, it leaves the pool: only handshakes in progress
	// compete for slots. One that passed proved the secret, and waits for
	// an Accept outside it.
	if !a.slots.leave(s) {
		// Evicted meanwhile: the loop closed it and counted it. (A re-dial
		// routed to its link just before is broken again, and its dialer
		// dials once more.)
		if p != nil {
			p.conn.Close()
			p.end()
		}
		cancel()
		return
	}
	if err == errRouted { // a re-dial, now its link's
		cancel()
		return
	}
	if err != nil {
		nc.Close()
		cancel()
		if a.ctx.Err() == nil { // not refused: the listener is closing
			a.refuse(err)
		}
		return
	}
	p.cancel = cancel
	select {
	case a.ready <- p:
	case <-ctx.Done():
		p.drop()
		if a.ctx.Err() == nil {
			a.refuse(fmt.Errorf("fifo: %s proved the secret, but no Accept took it within %v", p.peer, a.timeout))
		}
	}
}

// next returns a connection that passed its handshake. The caller finishes
// or drops it.
func (a *acceptor) next(ctx context.Context) (*pending, error) {
	select {
	case p := <-a.ready:
		return p, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("fifo: accept: %w", ctx.Err())
	case <-a.loopDone:
		return nil, a.loopErr
	}
}

// close stops accepting, aborts the handshakes in progress and waits for
// every goroutine of the acceptor to leave.
func (a *acceptor) close() error {
	a.closeOnce.Do(func() {
		a.cancel()
		d, canInterrupt := a.ln.(deadliner)
		switch {
		case a.owned:
			a.closeErr = a.ln.Close()
		case canInterrupt:
			d.SetDeadline(time.Unix(1, 0))
		}
		a.wg.Wait()
		if !a.owned && canInterrupt {
			d.SetDeadline(time.Time{})
		}
	})
	return a.closeErr
}

// TCPListener accepts tcp connections that pass the handshake, and only
// those: strays, garbage, wrong secrets or geometries, TLS refusals and
// silent or half-open connections are dropped and counted, each handshake
// runs on its own goroutine for at most the handshake timeout (5 s), and
// at most 1024 run at once (past that, a new connection takes the slot of
// the oldest of the busiest source's handshakes whose peer sent no hello
// yet, which is closed and counted with ErrBusy: see admission), so no
// connection delays another and strays cannot make the listener hold
// much, nor keep members out.
//
// A TCPListener keeps its connections' sessions: a connection whose tcp
// connection breaks is dialed again by its dialer and resumes (see
// resume.go), as long as the listener is open. Close it only once its
// connections are done.
type TCPListener struct {
	a      *acceptor
	cfg    Config
	secret []byte
	o      tcpOptions
	keeps  bool // sessions: a listener made by NewTCPListener

	smu      sync.Mutex
	sessions map[sessionID]*resumer
}

// NewTCPListener accepts on ln, which it owns from now on (Close closes
// it), connections of geometry cfg whose dialers prove secret; WithTLS
// makes them TLS connections, WithRefused reports what it drops.
func NewTCPListener(ln net.Listener, secret []byte, cfg Config, opts ...TCPOption) (*TCPListener, error) {
	return newTCPListener(ln, true, secret, cfg, tcpOptionsOf(opts))
}

func newTCPListener(ln net.Listener, owned bool, secret []byte, cfg Config, o tcpOptions) (*TCPListener, error) {
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if o.tls != nil {
		o.tls = tlsConfig(o.tls, "")
	}
	l := &TCPListener{cfg: c, secret: append([]byte(nil), secret...), o: o, keeps: owned, sessions: map[sessionID]*resumer{}}
	l.a = newAcceptor(ln, owned, o, l.shake)
	return l, nil
}

// shake is the acceptor's handshake of one tcp connection.
func (l *TCPListener) shake(ctx context.Context, nc net.Conn, progressed func()) (*pending, error) {
	peer := nc.RemoteAddr().String()
	end := limit(ctx, nc, l.o.timeout)
	p, err := l.shakeBounded(ctx, nc, peer, progressed)
	if err != nil {
		end()
		return nil, err
	}
	p.end = end
	return p, nil
}

func (l *TCPListener) shakeBounded(ctx context.Context, nc net.Conn, peer string, progressed func()) (*pending, error) {
	s := shake{ctx: ctx, nc: nc, peer: peer, secret: l.secret, cfg: l.cfg, transport: "tcp", keeps: l.keeps, progressed: progressed}
	if l.o.tls != nil {
		tc := tls.Server(nc, l.o.tls)
		b, err := tlsHandshake(ctx, tc, peer)
		if err != nil {
			return nil, err
		}
		s.nc, s.binding, s.tls = tc, b, true
	}
	t, err := s.accept()
	if err != nil {
		return nil, err
	}
	if sid := s.peerHello.Session; sid != (sessionID{}) {
		return nil, l.route(s.nc, nc, peer, sid)
	}
	p := &pending{conn: s.nc, raw: nc, peer: peer, t: t}
	p.session, p.hasSession = s.session(t)
	return p, nil
}

// route hands a re-dialed connection, whose dialer proved the secret for
// session sid, to the session's link; errRouted says it went there.
func (l *TCPListener) route(conn, raw net.Conn, peer string, sid sessionID) error {
	l.smu.Lock()
	r := l.sessions[sid]
	l.smu.Unlock()
	if r == nil || !r.open() {
		// Unknown, or its link died or closed: the dialer is fenced now,
		// not after re-dialing until DeadAfter.
		conn.Write([]byte{verdictUnknownSession})
		return fmt.Errorf("%w: %s dialed again for a session this listener does not hold", errUnknownSession, peer)
	}
	if _, err := conn.Write([]byte{verdictAccepted}); err != nil {
		return fmt.Errorf("fifo: handshake with %s: verdict: %w", peer, err)
	}
	conn.SetDeadline(time.Time{}) // the resume bounds its own exchange
	if !r.offer(&wire{nc: conn, raw: raw}) {
		conn.Close()
	}
	return errRouted
}

// Accept returns the next connection that passed its handshake, waiting
// for one until ctx ends or the listener is closed (then the error wraps
// net.ErrClosed).
func (l *TCPListener) Accept(ctx context.Context) (*Conn, error) {
	for {
		p, err := l.a.next(ctx)
		if err != nil {
			return nil, err
		}
		c, err := l.take(p)
		if err != nil {
			if l.a.ctx.Err() == nil {
				l.a.refuse(err)
			}
			continue
		}
		return c, nil
	}
}

// take makes the connection and tells p's dialer it is accepted. The
// session is registered before the verdict leaves: a dialer whose new
// connection breaks at once may re-dial before take returns.
func (l *TCPListener) take(p *pending) (*Conn, error) {
	var res *resumer
	if p.hasSession {
		res = newResumer(p.session, p.peer)
		sid := p.session
		res.forget = func() {
			l.smu.Lock()
			if l.sessions[sid] == res {
				delete(l.sessions, sid)
			}
			l.smu.Unlock()
		}
	}
	c := newTCPConn(p.conn, p.raw, l.cfg, res)
	if res != nil {
		l.smu.Lock()
		l.sessions[p.session] = res
		l.smu.Unlock()
	}
	if _, err := p.conn.Write([]byte{verdictAccepted}); err != nil {
		p.drop()
		c.Close()
		return nil, fmt.Errorf("fifo: handshake with %s: verdict: %w", p.peer, err)
	}
	if err := p.finish(); err != nil {
		p.conn.Close()
		c.Close()
		return nil, fmt.Errorf("fifo: handshake with %s: %w", p.peer, err)
	}
	return c, nil
}

// newTCPConn makes the connection over nc, whose tcp connection is raw
// (nc itself, or under TLS): keepalives and no delay apply to raw. res,
// when not nil, makes it resumable.
func newTCPConn(nc, raw net.Conn, cfg Config, res *resumer) *Conn {
	return newTCPLinkOn(&wire{nc: nc, raw: raw}, cfg, res)
}

// Refused counts the connections dropped so far, each counted after its
// WithRefused report has returned.
func (l *TCPListener) Refused() uint64 { return l.a.refused.Load() }

// Addr is the listener's address.
func (l *TCPListener) Addr() net.Addr { return l.a.ln.Addr() }

// Close stops accepting and closes the listener; handshakes in progress
// are aborted and connections not yet accepted closed. It returns once
// every goroutine of the listener has left.
func (l *TCPListener) Close() error { return l.a.close() }
