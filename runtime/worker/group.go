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
	if err := checkInterceptors(cfg); err != nil {
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
	// fifo.WithProvider): a link uses the one its accepting member (of
	// the two, the one whose name sorts first) names, and without one
	// libfabric's default choice.
	Addr string
}

// Start starts worker self of a group spread over processes or hosts. Every
// member must be given the same peer list, in the same order, and the same
// secret: each link opens with a hello naming the group as its member was
// started (names, order and transports, bound to the secret), and a link
// whose ends differ is refused by both, with ErrGroupMismatch naming both
// lists. Each pair connects once: members of one shm group share memory
// (the earlier listed creates it); otherwise a member on shared memory
// alone dials the tcp member, and of two tcp (or fabric) members the later
// listed dials, so any order and mix of tcp and shm members connects.
// Start returns once the whole group is up: every link of this worker is
// connected and every peer has said that all of its own links are too, so
// a message this worker sends to any member, or that a member sends on its
// behalf, finds its link (a message for a link not yet up waits for it;
// none is dropped). When ctx ends first, Start fails with an error naming
// the members missing. Connections that fail the handshake (strays,
// garbage, a wrong secret) are refused and logged; they do not stop Start.
// A member refused by another (its name already connected there, or the
// group already running) fails at once with ErrNotAdmitted.
func Start(ctx context.Context, self string, peers []Peer, secret []byte, cfg Config) (*Worker, error) {
	plan, err := planGroup(peers, secret)
	if err != nil {
		return nil, err
	}
	if err := checkInterceptors(cfg); err != nil {
		return nil, err
	}
	names := plan.names
	me := slices.Index(names, self)
	if me < 0 {
		return nil, fmt.Errorf("%w %q: not among the peers", ErrUnknownWorker, self)
	}
	if err := checkFabricProviders(plan, me); err != nil {
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
	mine := plan.addrs[me]
	needAccept := plan.accepts(me)
	if needAccept > 0 && mine.kind == kindFabric {
		ln, err := net.Listen("tcp", mine.hostPort)
		if err != nil {
			return fail(fmt.Errorf("worker: listen on %s: %w", peers[me].Addr, err))
		}
		fabricLn = ln
	} else if needAccept > 0 {
		ln, err := net.Listen("tcp", mine.hostPort)
		if err != nil {
			return fail(fmt.Errorf("worker: listen on %s: %w", peers[me].Addr, err))
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
					conn, err := fifo.AcceptFabric(ctx, fabricLn, secret, w.cfg.FIFO, fifo.WithProvider(mine.provider))
					if err == nil || ctx.Err() != nil {
						return conn, err
					}
					// A dialer refused (AcceptFabric's reason); accepting goes on.
					w.cfg.Logger.Warn("rref connection refused", "worker", w.name, "err", err)
				}
			}
		}
		go func() { errc <- w.acceptMembers(acceptCtx, accept, plan, me, needAccept) }()
	}
	// Links are made in the order of the members' names, each waiting for
	// its peer (shared memory) or for its listener (tcp), the same order at
	// every member: no two members can wait for each other.
	for _, j := range plan.byName {
		if j == me {
			continue
		}
		var conn *fifo.Conn
		var err error
		switch role := plan.role(me, j); role {
		case roleAccept:
			continue // it dials us
		case roleCreate, roleAttach:
			if role == roleCreate {
				conn, err = fifo.ListenSHM(ctx, plan.shmLinkName(me, j), secret, w.cfg.FIFO)
			} else {
				conn, err = fifo.DialSHM(ctx, plan.shmLinkName(me, j), secret, w.cfg.FIFO)
			}
			if err != nil {
				return fail(fmt.Errorf("worker: shared memory with %s: %w", peers[j].Name, err))
			}
			err = plan.exchange(ctx, conn, me, j)
		case roleDial:
			if theirs := plan.addrs[j]; theirs.kind == kindFabric {
				conn, err = retryDial(ctx, peers[j].Addr, func(ctx context.Context) (*fifo.Conn, error) {
					return fifo.DialFabric(ctx, theirs.hostPort, secret, w.cfg.FIFO, fifo.WithProvider(theirs.provider))
				})
			} else {
				conn, err = dialRetry(ctx, theirs.hostPort, secret, w.cfg.FIFO, w.tcpOptions()...)
			}
			if err != nil {
				return fail(fmt.Errorf("worker: connect to %s: %w", peers[j].Name, err))
			}
			err = plan.introduce(ctx, conn, me, j)
		}
		if err != nil {
			conn.Close()
			return fail(err)
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
	// listener would turn every reset into a dead peer). A new member that
	// dials it is refused with the reason.
	if tl != nil {
		w.listener = tl
		w.gs.start(func() { w.refuseLate(tl, plan, me) })
	}
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

// acceptMembers accepts the n members that dial this one (index me). A
// member that introduces itself wrongly is refused, told why, and logged,
// and accepting goes on (the listener already drops strays): nothing from
// outside the group must stop it. A member of a different group fails
// Start: the two were started on different member lists, and both must
// hear of it at once.
func (w *Worker) acceptMembers(ctx context.Context, accept func(context.Context) (*fifo.Conn, error), plan *groupPlan, me, n int) error {
	connected := func(id int) bool { return w.conn(core.WorkerID(id+1)) != nil }
	for n > 0 {
		conn, err := accept(ctx)
		if err != nil {
			return fmt.Errorf("worker: not every peer connected: %w", err)
		}
		id, err := w.admit(ctx, conn, plan, me, connected)
		if errors.Is(err, ErrGroupMismatch) {
			return err
		}
		if err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("worker: not every peer connected: %w", ctx.Err())
			}
			w.cfg.Logger.Warn("rref connection refused", "worker", w.name, "err", err)
			continue
		}
		w.attach(core.WorkerID(id+1), conn)
		n--
	}
	return nil
}

// admit reads a dialer's hello and answers it: this member's hello when
// it is taken (the caller attaches conn), or a refusal saying why (conn is
// closed).
func (w *Worker) admit(ctx context.Context, conn *fifo.Conn, plan *groupPlan, me int, connected func(int) bool) (int, error) {
	m, err := readGroupFrame(ctx, conn)
	var id int
	var reason groupwire.RefusalReason
	if err != nil {
		reason = groupwire.RefusalReasonMalformed
	} else {
		id, reason, err = plan.admission(m, me, connected)
	}
	if err != nil {
		conn.Send(ctx, plan.refusal(reason, err.Error())) // best effort: it may be gone
		conn.Close()
		return -1, err
	}
	if err := conn.Send(ctx, plan.helloFrame(me)); err != nil {
		conn.Close()
		return -1, fmt.Errorf("worker: answer %s's hello: %w", plan.names[id], err)
	}
	return id, nil
}

// refuseLate answers the members that dial this one once the group has
// started, for the worker's life: a second process under a member's name,
// a member restarted after a crash, a member of another group. Each hears
// why at once, rather than waiting for its Start to time out.
func (w *Worker) refuseLate(tl *fifo.TCPListener, plan *groupPlan, me int) {
	for {
		conn, err := tl.Accept(w.ctx)
		if err != nil {
			return // closed
		}
		if !w.gs.start(func() { w.refuseOne(conn, plan, me) }) {
			conn.Close()
			return
		}
	}
}

func (w *Worker) refuseOne(conn *fifo.Conn, plan *groupPlan, me int) {
	m, err := readGroupFrame(w.ctx, conn)
	reason := groupwire.RefusalReasonMalformed
	if err == nil {
		var id int
		id, reason, err = plan.admission(m, me, func(int) bool { return false })
		if err == nil {
			reason = groupwire.RefusalReasonGroupRunning
			if w.conn(core.WorkerID(id+1)) != nil && !w.peerIsFailed(core.WorkerID(id+1)) {
				reason = groupwire.RefusalReasonMemberConnected
				err = fmt.Errorf("worker: %s is already connected to %s (a second process named %s, or %s restarted before %s saw it fail)", plan.names[id], plan.names[me], plan.names[id], plan.names[id], plan.names[me])
			} else {
				err = fmt.Errorf("worker: the group has started and %s's link to %s is gone for good: a member cannot rejoin a running group under its name", plan.names[id], plan.names[me])
			}
		}
	}
	conn.Send(w.ctx, plan.refusal(reason, err.Error())) // best effort: it may be gone
	conn.Close()
	w.cfg.Logger.Warn("rref connection refused", "worker", w.name, "err", err)
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
// will use: its own (its links to the members that dial it) and those of
// the members it dials. A missing one would otherwise show as a peer that
// never answers, its acceptor having refused the connection.
func checkFabricProviders(plan *groupPlan, me int) error {
	if plan.addrs[me].kind != kindFabric {
		return nil
	}
	var here []string
	for i, a := range plan.addrs {
		switch {
		case a.provider == "": // libfabric's default
			continue
		case i == me && plan.accepts(me) == 0: // its own, which no link uses
			continue
		case i != me && plan.role(me, i) != roleDial: // the link uses me's
			continue
		}
		if here == nil {
			var err error
			if here, err = fifo.FabricProviders(); err != nil {
				return fmt.Errorf("worker: %s names fabric provider %q: %w", plan.names[i], a.provider, err)
			}
		}
		if !slices.Contains(here, a.provider) {
			return fmt.Errorf("worker: %s names fabric provider %q, which libfabric does not offer on this host (it offers %s)", plan.names[i], a.provider, strings.Join(here, ", "))
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
