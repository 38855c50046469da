// Package node runs a protocol's handlers for real, the same code the
// explorer checks (package protocol/world): one node per process (or
// several), linked to its peers over the fifo transport (tcp, shared
// memory between the nodes of one host that name one group, or libfabric),
// with the messages framed by the generated codecs, real timers, and a
// durable record in a file that survives a crash.
//
// A node runs its events one at a time on one goroutine, as the world
// steps them: messages from its links, timers, and the inputs its
// application fires (Input). Every event goes through the spec's table
// first; an event the table does not declare, or a handler's error, stops
// the node (Err says why), since it is a bug the explorer should have
// found. Links keep each pair's order; a message to a peer whose link is
// down is lost, as in a world whose node crashed. A link's dialer (of two
// nodes, the one whose name sorts last) dials again until the link is
// back, so a peer that crashes and restarts is linked again.
package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/rrefkit/rref/fifo"
	"github.com/rrefkit/rref/internal/deep"
	"github.com/rrefkit/rref/protocol"
	"github.com/rrefkit/rref/protocol/internal/engine"
)

// Peer is one node of the group and where it is reached: "host:port",
// where it listens for tcp links; "shm:GROUP" for a node on this host that
// links over shared memory to the other nodes of GROUP and dials the tcp
// nodes (it listens for none); or "fabric:[PROVIDER@]host:port" for a node
// on libfabric (in a build with -tags rreffabric), which links to fabric
// nodes only, with the provider the accepting node names.
type Peer struct {
	Name protocol.NodeID
	Addr string
}

// Config is one node of a group.
type Config struct {
	Name protocol.NodeID
	// Peers is the whole group, this node included: every node is given
	// the same list.
	Peers  []Peer
	Secret []byte // the group's secret, which every link proves
	// StateFile keeps the node's saved record across crashes ("": in
	// memory only, lost with the process).
	StateFile string
	// AfterSave, when set, runs on the node's goroutine once a record is
	// durable: a test's crash point.
	AfterSave func(m any)
	Logger    *slog.Logger
	FIFO      fifo.Config
	// Redial is how long a dialer waits between attempts (default 50 ms).
	Redial time.Duration
}

// DefaultRedial is the pause between a dialer's attempts: short against a
// restart, long against a spinning loop.
const DefaultRedial = 50 * time.Millisecond

// inboxSize holds the events that arrive while the node runs one: links
// and timers wait when it is full, which bounds what a slow node buffers.
const inboxSize = 1024

// Errors of a node. Each is matched with errors.Is.
var (
	ErrConfig   = errors.New("node: bad config")
	ErrClosed   = errors.New("node: closed")
	ErrDisabled = errors.New("node: the input is not enabled")
)

// Node is one running machine instance.
type Node struct {
	cfg    Config
	role   *protocol.Role
	codec  *protocol.Codec
	log    *slog.Logger
	peers  map[protocol.NodeID]string
	addrs  map[protocol.NodeID]addr
	roles  map[protocol.NodeID]linkRole
	start  time.Time
	ctx    context.Context
	cancel context.CancelFunc
	inbox  chan func()
	done   chan struct{}
	err    error // why the node stopped, once done is closed
	wg     sync.WaitGroup

	// Owned by the node's goroutine.
	in     *engine.Instance
	timers map[timerKey]*armed
	local  []func() // messages to itself, after the running event

	mu     sync.Mutex
	links  map[protocol.NodeID]*fifo.Conn
	linked map[protocol.NodeID]bool // peers linked at least once

	// acceptLink takes the next link a peer dials, and closeListener ends
	// the listener: set once at Start, both nil for a shared-memory node,
	// which listens on no port.
	acceptLink    func(ctx context.Context) (*fifo.Conn, error)
	closeListener func()
}

type timerKey struct {
	event int
	key   string
}

type armed struct {
	t   *time.Timer
	gen uint64
}

// Start starts node cfg.Name running role: it listens, links to every
// peer (returning once each was linked, so that the start hook's messages
// reach them), runs the start hook with the record it saved, and then events
// until Close or a failure.
func Start(ctx context.Context, cfg Config, role *protocol.Role) (*Node, error) {
	n := &Node{cfg: cfg, role: role, log: cfg.Logger, peers: map[protocol.NodeID]string{}, addrs: map[protocol.NodeID]addr{}, roles: map[protocol.NodeID]linkRole{},
		inbox: make(chan func(), inboxSize), done: make(chan struct{}), timers: map[timerKey]*armed{}, links: map[protocol.NodeID]*fifo.Conn{}, linked: map[protocol.NodeID]bool{}}
	if n.log == nil {
		n.log = slog.New(slog.DiscardHandler)
	}
	n.log = n.log.With("node", string(cfg.Name))
	if n.cfg.Redial <= 0 {
		n.cfg.Redial = DefaultRedial
	}
	if role == nil || role.Machine == nil || role.New == nil {
		return nil, fmt.Errorf("%w: no role", ErrConfig)
	}
	n.codec = role.Machine.Codec
	for _, p := range cfg.Peers {
		if _, dup := n.peers[p.Name]; dup || p.Name == "" {
			return nil, fmt.Errorf("%w: peer name %q is empty or repeated", ErrConfig, p.Name)
		}
		a, err := parseAddr(p.Name, p.Addr)
		if err != nil {
			return nil, err
		}
		n.peers[p.Name], n.addrs[p.Name] = p.Addr, a
	}
	mine, ok := n.addrs[cfg.Name]
	if !ok {
		return nil, fmt.Errorf("%w: %s is not among the peers", ErrConfig, cfg.Name)
	}
	for name, theirs := range n.addrs {
		if name == cfg.Name {
			continue
		}
		r, err := roleOf(cfg.Name, name, mine, theirs)
		if err != nil {
			return nil, err
		}
		n.roles[name] = r
	}
	saved, err := n.load()
	if err != nil {
		return nil, err
	}
	if mine.hostPort != "" {
		if err := n.listen(mine); err != nil {
			return nil, err
		}
	}
	n.ctx, n.cancel = context.WithCancel(context.Background())
	n.start = time.Now()
	if n.acceptLink != nil {
		n.wg.Add(1)
		go n.accept()
	}
	for name, r := range n.roles {
		switch r {
		case roleDial:
			n.wg.Add(1)
			go n.dial(name, n.addrs[name])
		case roleSHMCreate, roleSHMAttach:
			n.wg.Add(1)
			go n.shmLink(name, shmLinkName(n.codec.Name, mine.shmGroup, cfg.Name, name), r == roleSHMCreate)
		}
	}
	if err := n.waitLinked(ctx); err != nil {
		n.shutdown()
		return nil, err
	}
	n.in = &engine.Instance{Machine: role.Machine, State: role.Machine.Start, Handler: role.New()}
	if err := role.Machine.Begin(n.in.Handler, n, saved); err != nil {
		n.shutdown()
		return nil, fmt.Errorf("node: %s: start: %w", cfg.Name, err)
	}
	if err := n.in.Drain(n); err != nil {
		n.shutdown()
		return nil, fmt.Errorf("node: %s: start: %w", cfg.Name, err)
	}
	go n.loop()
	return n, nil
}

// waitLinked waits until every peer has been linked: once, since a peer
// that is done may have gone again.
func (n *Node) waitLinked(ctx context.Context) error {
	for {
		n.mu.Lock()
		var missing []protocol.NodeID
		for name := range n.peers {
			if name != n.cfg.Name && !n.linked[name] {
				missing = append(missing, name)
			}
		}
		n.mu.Unlock()
		if len(missing) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("node: %s: peers %v not linked: %w", n.cfg.Name, missing, ctx.Err())
		case <-time.After(n.cfg.Redial):
		}
	}
}

// loop runs events one at a time until the node stops.
func (n *Node) loop() {
	defer n.shutdown()
	for {
		select {
		case <-n.ctx.Done():
			n.stop(ErrClosed)
			return
		case ev := <-n.inbox:
			ev()
			for len(n.local) > 0 && n.err == nil {
				next := n.local[0]
				n.local = n.local[1:]
				next()
			}
			if n.err != nil {
				return
			}
		}
	}
}

// stop records why the node stops (the first reason).
func (n *Node) stop(err error) {
	if n.err == nil {
		n.err = err
	}
}

// run steps one event on the node's goroutine.
func (n *Node) run(event int, from protocol.NodeID, payload any) {
	if n.err != nil {
		return
	}
	if err := n.in.Run(n, event, from, payload); err != nil {
		n.log.Error("node failed", "err", err)
		n.stop(fmt.Errorf("node: %s: %w", n.cfg.Name, err))
	}
}

// post queues f for the node's goroutine; false once the node stopped.
func (n *Node) post(f func()) bool {
	select {
	case n.inbox <- f:
		return true
	case <-n.ctx.Done():
		return false
	}
}

// Input fires input event e (a generated event constant) and returns once
// the node ran it: ErrDisabled when the table or the handler's guard
// refuses it now, the node's failure if it failed.
func Input[E ~uint8 | ~uint16 | ~uint32](ctx context.Context, n *Node, e E) error {
	event := int(e)
	res := make(chan error, 1)
	ok := n.post(func() {
		m := n.role.Machine
		if event < 0 || event >= len(m.Sources) || m.Sources[event] != protocol.Input {
			res <- fmt.Errorf("%w: event %d is no input of machine %s", ErrDisabled, event, m.Info.Name)
			return
		}
		if _, _, err := m.Step(n.in.State, event); err != nil || !m.Enabled(n.in.Handler, event) {
			res <- fmt.Errorf("%w: %s in state %s", ErrDisabled, m.EventName(event), m.StateName(n.in.State))
			return
		}
		n.run(event, "", nil)
		res <- n.err
	})
	if !ok {
		return n.Err()
	}
	select {
	case err := <-res:
		return err
	case <-ctx.Done():
		return ctx.Err()
	case <-n.done:
		return n.Err()
	}
}

// Inspect runs fn on the node's goroutine with its machine's state and
// its handler, which fn may read but must not keep or change.
func (n *Node) Inspect(ctx context.Context, fn func(state int, handler any)) error {
	res := make(chan struct{})
	if !n.post(func() { fn(n.in.State, n.in.Handler); close(res) }) {
		return n.Err()
	}
	select {
	case <-res:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-n.done:
		return n.Err()
	}
}

// Done is closed once the node stopped; Err then says why.
func (n *Node) Done() <-chan struct{} { return n.done }

// Err is why the node stopped (ErrClosed after Close), or nil while it runs.
func (n *Node) Err() error {
	select {
	case <-n.done:
		return n.err
	default:
		return nil
	}
}

// Close stops the node and closes its links.
func (n *Node) Close() error {
	n.cancel()
	<-n.done
	if errors.Is(n.err, ErrClosed) {
		return nil
	}
	return n.err
}

// shutdown closes everything and waits for the node's goroutines; it
// runs once, on the node's goroutine (or in Start when it fails).
func (n *Node) shutdown() {
	n.stop(ErrClosed)
	n.cancel()
	if n.closeListener != nil {
		n.closeListener()
	}
	n.mu.Lock()
	for name, c := range n.links {
		c.Close()
		delete(n.links, name)
	}
	n.mu.Unlock()
	for _, a := range n.timers {
		a.t.Stop()
	}
	n.wg.Wait()
	close(n.done)
}

// Self, Now, Logf, Send, Save, Raise, SetTimer and CancelTimer are the
// node as its handlers' host (protocol.Host), on the node's goroutine.

func (n *Node) Self() protocol.NodeID { return n.cfg.Name }
func (n *Node) Now() time.Duration    { return time.Since(n.start) }
func (n *Node) Logf(format string, args ...any) {
	n.log.Info(fmt.Sprintf(format, args...))
}

func (n *Node) Raise(e int, payload any) {
	n.in.Raised = append(n.in.Raised, engine.Raised{Event: e, Payload: payload})
}

func (n *Node) Send(to protocol.NodeID, m any) {
	frame, err := n.codec.Append(nil, m)
	if err != nil {
		n.stop(fmt.Errorf("node: %s: send: %w", n.cfg.Name, err))
		return
	}
	if to == n.cfg.Name {
		msg, err := n.codec.Decode(frame)
		if err != nil {
			n.stop(fmt.Errorf("node: %s: send to itself: %w", n.cfg.Name, err))
			return
		}
		n.local = append(n.local, func() { n.deliver(n.cfg.Name, msg) })
		return
	}
	if _, ok := n.peers[to]; !ok {
		n.stop(fmt.Errorf("node: %s: send to %s, which is no peer", n.cfg.Name, to))
		return
	}
	n.mu.Lock()
	c := n.links[to]
	n.mu.Unlock()
	if c == nil {
		n.log.Debug("message lost: no link", "to", string(to))
		return
	}
	if err := c.Send(n.ctx, frame); err != nil {
		n.log.Debug("message lost", "to", string(to), "err", err)
		n.drop(to, c)
	}
}

// deliver runs the event that delivers msg from a peer.
func (n *Node) deliver(from protocol.NodeID, msg any) {
	e, ok := n.role.Machine.EventOf(n.in.State, msg)
	if !ok {
		n.stop(fmt.Errorf("node: %s: %w", n.cfg.Name, protocol.Undeclared(n.role.Machine, n.in.State, fmt.Sprintf("no event carries %T from %s", msg, from))))
		return
	}
	n.run(e, from, msg)
}

func (n *Node) SetTimer(e int, d time.Duration, payload any) {
	k, ok := n.timerKey(e, payload)
	if !ok {
		return
	}
	a := n.timers[k]
	if a == nil {
		a = &armed{}
		n.timers[k] = a
	} else if a.t != nil {
		a.t.Stop()
	}
	a.gen++
	gen := a.gen
	a.t = time.AfterFunc(max(d, 0), func() {
		n.post(func() {
			// A timer set again or cancelled since it fired is stale.
			if cur := n.timers[k]; cur == a && cur.gen == gen {
				delete(n.timers, k)
				n.run(e, "", payload)
			}
		})
	})
}

func (n *Node) CancelTimer(e int, payload any) {
	if k, ok := n.timerKey(e, payload); ok {
		if a := n.timers[k]; a != nil {
			a.t.Stop()
			delete(n.timers, k)
		}
	}
}

func (n *Node) timerKey(e int, payload any) (timerKey, bool) {
	key, err := deep.Append(nil, payload)
	if err != nil {
		n.stop(fmt.Errorf("node: %s: timer key: %w", n.cfg.Name, err))
		return timerKey{}, false
	}
	return timerKey{e, string(key)}, true
}

// ParsePeers reads a group as a program's flag gives it:
// "name=host:port,name=host:port".
func ParsePeers(s string) ([]Peer, error) {
	var out []Peer
	for _, part := range strings.Split(s, ",") {
		name, addr, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok || name == "" || addr == "" {
			return nil, fmt.Errorf("%w: peer %q is not name=host:port", ErrConfig, part)
		}
		out = append(out, Peer{Name: protocol.NodeID(name), Addr: addr})
	}
	return out, nil
}
