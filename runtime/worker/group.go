package worker

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/rrefkit/rref/fifo"
	groupwire "github.com/rrefkit/rref/generated/group"
	"github.com/rrefkit/rref/runtime/core"
)

// NewGroup starts workers with the given names in this process, each pair
// connected by an in-memory FIFO (provider mem).
func NewGroup(names []string, cfg Config) ([]*Worker, error) {
	if err := checkNames(names); err != nil {
		return nil, err
	}
	ws := make([]*Worker, len(names))
	for i := range names {
		ws[i] = newWorker(names, core.WorkerID(i+1), cfg)
		if cfg.Setup != nil {
			cfg.Setup(ws[i])
		}
	}
	for i := range ws {
		for j := i + 1; j < len(ws); j++ {
			a, b, err := fifo.Pipe(ws[i].cfg.FIFO)
			if err != nil {
				for _, w := range ws {
					w.Close()
				}
				return nil, err
			}
			ws[i].attach(core.WorkerID(j+1), a)
			ws[j].attach(core.WorkerID(i+1), b)
		}
	}
	return ws, nil
}

func checkNames(names []string) error {
	if len(names) == 0 {
		return errors.New("worker: a group needs at least one member; no names given")
	}
	seen := map[string]bool{}
	for _, n := range names {
		if n == "" || seen[n] {
			return fmt.Errorf("worker: names must be unique and non-empty: %q", names)
		}
		seen[n] = true
	}
	return nil
}

// Peer is one member of a group started across processes or hosts.
type Peer struct {
	Name string
	// Addr is "host:port" for tcp, "shm:GROUP" for shared memory with the
	// other "shm:GROUP" peers on this host, or "fabric:host:port" for
	// libfabric (fifo.DialFabric, in a build with -tags rreffabric), where
	// host:port is where the member accepts; fabric members connect only
	// to fabric members. "fabric:PROVIDER@host:port" names the libfabric
	// provider ("verbs;ofi_rxm", "efa", "tcp;ofi_rxm", "shm", ...; see
	// fifo.WithProvider): a link uses the one its accepting member (the
	// earlier listed) names, and without one libfabric's default choice.
	Addr string
}

// Start starts worker self of a group spread over processes or hosts. Every
// member must be given the same peer list, in the same order, and the same
// secret. Each pair connects once: the member listed first accepts (tcp) or
// creates the shared memory (shm), the other dials. Start returns once the
// whole group is up: every link of this worker is connected and every peer
// has said that all of its own links are too, so a message this worker
// sends to any member, or that a member sends on its behalf, finds its link
// (a message for a link not yet up waits for it; none is dropped). When ctx
// ends first, Start fails with an error naming the members missing.
// Connections that fail the handshake (strays, garbage, a wrong secret) are
// refused and logged; they do not stop Start.
func Start(ctx context.Context, self string, peers []Peer, secret []byte, cfg Config) (*Worker, error) {
	names := make([]string, len(peers))
	me := -1
	for i, p := range peers {
		names[i] = p.Name
		if p.Name == self {
			me = i
		}
	}
	if err := checkNames(names); err != nil {
		return nil, err
	}
	for _, p := range peers {
		if isFabric(p.Addr) != isFabric(peers[0].Addr) {
			return nil, fmt.Errorf("worker: %s (%s) and %s (%s): a group is on libfabric whole or not at all", peers[0].Name, peers[0].Addr, p.Name, p.Addr)
		}
		if isFabric(p.Addr) {
			if _, _, err := parseFabricAddr(p.Addr); err != nil {
				return nil, fmt.Errorf("worker: %s: %w", p.Name, err)
			}
		}
	}
	if me < 0 {
		return nil, fmt.Errorf("%w %q: not among the peers", ErrUnknownWorker, self)
	}
	if err := checkFabricProviders(peers, me); err != nil {
		return nil, err
	}
	w := newWorker(names, core.WorkerID(me+1), cfg)
	if cfg.Setup != nil {
		cfg.Setup(w)
	}
	defer w.noticeWaiting()()
	accepting := false
	acceptCtx, stopAccepting := context.WithCancel(ctx)
	defer stopAccepting()
	errc := make(chan error, 1)
	var tl *fifo.TCPListener
	var fabricLn net.Listener // a fabric member's: only Start accepts on it
	defer func() {
		if fabricLn != nil {
			fabricLn.Close()
		}
	}()
	fail := func(err error) (*Worker, error) {
		if ctx.Err() != nil {
			err = fmt.Errorf("%w (%s)", err, w.missing())
		}
		// The acceptor attaches connections: it must be gone before Close.
		stopAccepting()
		if tl != nil {
			tl.Close()
		}
		if accepting {
			<-errc
		}
		w.Close()
		return nil, err
	}
	myAddr := peers[me].Addr
	needAccept := 0
	for j := me + 1; j < len(peers); j++ {
		if !isSHM(peers[j].Addr) || !isSHM(myAddr) {
			needAccept++
		}
	}
	myProvider, myHostPort, _ := parseFabricAddr(myAddr)
	if needAccept > 0 && isFabric(myAddr) {
		ln, err := net.Listen("tcp", myHostPort)
		if err != nil {
			return fail(fmt.Errorf("worker: listen on %s: %w", myAddr, err))
		}
		fabricLn = ln
	} else if needAccept > 0 && !isSHM(myAddr) {
		ln, err := net.Listen("tcp", myAddr)
		if err != nil {
			return fail(fmt.Errorf("worker: listen on %s: %w", myAddr, err))
		}
		// Strays, garbage and wrong secrets are dropped by the listener,
		// each handshake on its own goroutine, and logged here.
		tl, err = fifo.NewTCPListener(ln, secret, w.cfg.FIFO, append(w.tcpOptions(), fifo.WithRefused(func(err error) {
			w.cfg.Logger.Warn("rref connection refused", "worker", w.name, "err", err)
		}))...)
		if err != nil {
			ln.Close()
			return fail(err)
		}
	}
	if needAccept > 0 {
		accepting = true
		accept := func(ctx context.Context) (*fifo.Conn, error) { return tl.Accept(ctx) }
		if fabricLn != nil {
			accept = func(ctx context.Context) (*fifo.Conn, error) {
				for {
					conn, err := fifo.AcceptFabric(ctx, fabricLn, secret, w.cfg.FIFO, fifo.WithProvider(myProvider))
					if err == nil || ctx.Err() != nil {
						return conn, err
					}
					// A dialer refused (AcceptFabric's reason); accepting goes on.
					w.cfg.Logger.Warn("rref connection refused", "worker", w.name, "err", err)
				}
			}
		}
		go func() { errc <- w.acceptMembers(acceptCtx, accept, me, needAccept) }()
	}
	for j := range peers {
		if j == me {
			continue
		}
		if isSHM(peers[j].Addr) && isSHM(myAddr) {
			lo, hi := min(me, j), max(me, j)
			name := fmt.Sprintf("rref-%s-%d-%d", strings.TrimPrefix(myAddr, "shm:"), lo, hi)
			var conn *fifo.Conn
			var err error
			if me == lo {
				conn, err = fifo.ListenSHM(ctx, name, secret, w.cfg.FIFO)
			} else {
				conn, err = fifo.DialSHM(ctx, name, secret, w.cfg.FIFO)
			}
			if err != nil {
				return fail(fmt.Errorf("worker: shared memory with %s: %w", peers[j].Name, err))
			}
			w.attach(core.WorkerID(j+1), conn)
			continue
		}
		if j > me {
			continue // it dials us
		}
		var conn *fifo.Conn
		var err error
		if isFabric(peers[j].Addr) {
			provider, hostPort, _ := parseFabricAddr(peers[j].Addr)
			conn, err = retryDial(ctx, peers[j].Addr, func(ctx context.Context) (*fifo.Conn, error) {
				return fifo.DialFabric(ctx, hostPort, secret, w.cfg.FIFO, fifo.WithProvider(provider))
			})
		} else {
			conn, err = dialRetry(ctx, peers[j].Addr, secret, w.cfg.FIFO, w.tcpOptions()...)
		}
		if err != nil {
			return fail(fmt.Errorf("worker: connect to %s: %w", peers[j].Name, err))
		}
		if err := conn.Send(ctx, groupwire.AppendFrame(nil, &groupwire.Hello{Member: uint32(me)})); err != nil {
			conn.Close()
			return fail(fmt.Errorf("worker: introduce this worker to %s: %w", peers[j].Name, err))
		}
		w.attach(core.WorkerID(j+1), conn)
	}
	if needAccept > 0 {
		select {
		case err := <-errc:
			accepting = false
			if err != nil {
				return fail(err)
			}
		case <-ctx.Done():
			return fail(fmt.Errorf("worker: not every peer connected: %w", ctx.Err()))
		}
	}
	if err := w.groupReady(ctx); err != nil {
		return fail(err)
	}
	// The listener stays open for the worker's life: a tcp link whose
	// connection breaks is dialed again through it and resumes (a closed
	// listener would turn every reset into a dead peer).
	w.listener = tl
	return w, nil
}

// startNoticeEvery is how often Start logs the members it still waits for:
// members start in any order, so a few seconds of waiting is normal, and
// one line per interval says who is late without flooding the log.
const startNoticeEvery = 5 * time.Second

// noticeWaiting logs, every startNoticeEvery until the returned function
// is called, the members Start still waits for: a member that never comes
// (a wrong address, a process that did not start) shows while Start
// waits, not only when its context ends.
func (w *Worker) noticeWaiting() (stop func()) {
	every := w.cfg.startNotice
	if every <= 0 {
		every = startNoticeEvery
	}
	began := time.Now()
	done := make(chan struct{})
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				if m := w.missing(); m != "" {
					w.cfg.Logger.Info("rref start waiting for members", "worker", w.name, "waited", time.Since(began).Round(time.Millisecond), "missing", m)
				}
			}
		}
	}()
	return func() {
		close(done)
		<-ended // no line after Start has returned
	}
}

// tcpOptions are the options of this worker's tcp connections.
func (w *Worker) tcpOptions() []fifo.TCPOption {
	if w.cfg.TLS != nil {
		return []fifo.TCPOption{fifo.WithTLS(w.cfg.TLS)}
	}
	return nil
}

// acceptMembers accepts the n members listed after this one (index me).
// A member that introduces itself wrongly is refused and logged, and
// accepting goes on (the listener already drops strays): nothing from
// outside the group must stop it.
func (w *Worker) acceptMembers(ctx context.Context, accept func(context.Context) (*fifo.Conn, error), me, n int) error {
	for n > 0 {
		conn, err := accept(ctx)
		if err != nil {
			return fmt.Errorf("worker: not every peer connected: %w", err)
		}
		id, err := readHello(ctx, conn, len(w.names))
		switch {
		case err == nil && id <= me:
			err = fmt.Errorf("%s should not dial %s, listed before it", w.names[id], w.name)
		case err == nil && w.conn(core.WorkerID(id+1)) != nil:
			err = fmt.Errorf("%s is already connected", w.names[id])
		}
		if err != nil {
			conn.Close()
			if ctx.Err() != nil {
				return fmt.Errorf("worker: not every peer connected: %w", ctx.Err())
			}
			w.cfg.Logger.Warn("rref connection refused", "worker", w.name, "err", fmt.Errorf("worker: a peer's introduction: %w", err))
			continue
		}
		w.attach(core.WorkerID(id+1), conn)
		n--
	}
	return nil
}

// readyFrame is the frame by which a member says that all of its links are
// up (see Start).
var readyFrame = groupwire.AppendFrame(nil, &groupwire.Ready{})

// groupReady tells every peer that this worker's links are all up, and
// waits until every peer has said the same.
func (w *Worker) groupReady(ctx context.Context) error {
	for i := range w.peers {
		conn := w.peers[i].Load()
		if conn == nil {
			continue
		}
		if err := conn.Send(ctx, readyFrame); err != nil {
			return fmt.Errorf("worker: tell %s this worker is ready: %w", w.names[i], err)
		}
	}
	for {
		if w.missing() == "" {
			return nil
		}
		select {
		case <-w.readyNote:
		case <-ctx.Done():
			return fmt.Errorf("worker: the group is not ready: %w", ctx.Err())
		}
	}
}

// peerReady records a peer's ready frame.
func (w *Worker) peerReady(from core.WorkerID) {
	w.readyFrom[from-1].Store(true)
	select {
	case w.readyNote <- struct{}{}:
	default:
	}
}

// missing names the members this worker is not yet connected to, and those
// connected that have not said they are ready; "" when there are none.
func (w *Worker) missing() string {
	var notConnected, notReady []string
	for i, name := range w.names {
		switch {
		case core.WorkerID(i+1) == w.id:
		case w.peers[i].Load() == nil:
			notConnected = append(notConnected, name)
		case !w.readyFrom[i].Load():
			notReady = append(notReady, name)
		}
	}
	var parts []string
	if len(notConnected) > 0 {
		parts = append(parts, "not connected: "+strings.Join(notConnected, ", "))
	}
	if len(notReady) > 0 {
		parts = append(parts, "connected, not yet ready: "+strings.Join(notReady, ", "))
	}
	return strings.Join(parts, "; ")
}

func isSHM(addr string) bool { return strings.HasPrefix(addr, "shm:") }

func isFabric(addr string) bool { return strings.HasPrefix(addr, "fabric:") }

// checkFabricProviders makes sure this host has every provider member me
// will use: its own (its links to later members) and those the earlier
// members name (its links to them). A missing one would otherwise show as
// a peer that never answers, its acceptor having refused the connection.
func checkFabricProviders(peers []Peer, me int) error {
	if !isFabric(peers[me].Addr) {
		return nil
	}
	var here []string
	for i, p := range peers[:me+1] {
		provider, _, _ := parseFabricAddr(p.Addr)
		if provider == "" || i == me && me == len(peers)-1 {
			continue // libfabric's default; or the last member's own, which no link uses
		}
		if here == nil {
			var err error
			if here, err = fifo.FabricProviders(); err != nil {
				return fmt.Errorf("worker: %s names fabric provider %q: %w", p.Name, provider, err)
			}
		}
		if !slices.Contains(here, provider) {
			return fmt.Errorf("worker: %s names fabric provider %q, which libfabric does not offer on this host (it offers %s)", p.Name, provider, strings.Join(here, ", "))
		}
	}
	return nil
}

// parseFabricAddr splits "fabric:[PROVIDER@]host:port" into the provider
// ("" for libfabric's default choice) and the address to accept on.
func parseFabricAddr(addr string) (provider, hostPort string, err error) {
	rest, ok := strings.CutPrefix(addr, "fabric:")
	if !ok {
		return "", "", fmt.Errorf("worker: %q is not a fabric address", addr)
	}
	hostPort = rest
	if before, after, named := strings.Cut(rest, "@"); named {
		provider, hostPort = before, after
		if provider == "" {
			return "", "", fmt.Errorf("worker: fabric address %q: an empty provider before '@' (leave the '@' out for the default)", addr)
		}
	}
	if _, _, err := net.SplitHostPort(hostPort); err != nil {
		return "", "", fmt.Errorf("worker: fabric address %q: %w", addr, err)
	}
	return provider, hostPort, nil
}

func readHello(ctx context.Context, conn *fifo.Conn, n int) (int, error) {
	b, err := conn.Recv(ctx, nil)
	if err != nil {
		return -1, err
	}
	m, err := groupwire.Decode(b, nil)
	if err != nil {
		return -1, fmt.Errorf("malformed hello: %w", err)
	}
	h, ok := m.(*groupwire.Hello)
	if !ok {
		return -1, fmt.Errorf("a %v frame where a hello belongs", m.MessageCode())
	}
	if int64(h.Member) >= int64(n) {
		return -1, errors.New("hello names no member")
	}
	return int(h.Member), nil
}

// dialRetry dials until the peer listens or ctx ends: members of a group
// start in any order.
func dialRetry(ctx context.Context, addr string, secret []byte, cfg fifo.Config, opts ...fifo.TCPOption) (*fifo.Conn, error) {
	return retryDial(ctx, addr, func(ctx context.Context) (*fifo.Conn, error) { return fifo.DialTCP(ctx, addr, secret, cfg, opts...) })
}

// retryDial is dialRetry with any dialer.
func retryDial(ctx context.Context, addr string, dial func(context.Context) (*fifo.Conn, error)) (*fifo.Conn, error) {
	wait := time.Millisecond
	for {
		conn, err := dial(ctx)
		if err == nil || errors.Is(err, fifo.ErrAuth) || errors.Is(err, fifo.ErrNoFabric) || ctx.Err() != nil {
			return conn, err
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("worker: %s never answered: %w", addr, err)
		case <-time.After(wait):
		}
		wait = min(2*wait, 100*time.Millisecond)
	}
}
