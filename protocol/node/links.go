package node

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/rrefkit/rref/fifo"
	"github.com/rrefkit/rref/generated/nodewire"
	"github.com/rrefkit/rref/protocol"
)

// helloTimeout bounds a new link's exchange of hellos: a peer that says
// nothing for this long is not one of the group's.
const helloTimeout = 5 * time.Second

// accept takes the links that peers dial.
func (n *Node) accept() {
	defer n.wg.Done()
	for {
		c, err := n.acceptLink(n.ctx)
		if err != nil {
			if n.ctx.Err() != nil {
				return
			}
			n.log.Debug("accept", "err", err)
			continue
		}
		n.wg.Add(1)
		go func() {
			defer n.wg.Done()
			name, err := n.hello(c, "", false)
			if err != nil {
				n.log.Warn("link refused", "err", err)
				c.Close()
				return
			}
			n.serve(name, c)
		}()
	}
}

// keepLinked keeps the link to peer name up: it connects again whenever
// the link is down (so that a restarted peer is linked again), pausing
// Redial after a failure, until the node stops. speaksFirst: this end
// dialed or attached, and opens the hellos.
func (n *Node) keepLinked(name protocol.NodeID, how string, speaksFirst bool, connect func() (*fifo.Conn, error)) {
	defer n.wg.Done()
	for n.ctx.Err() == nil {
		c, err := connect()
		if err == nil {
			if _, err = n.hello(c, name, speaksFirst); err == nil {
				n.serve(name, c) // until the link breaks
				continue
			}
			c.Close()
		}
		n.log.Debug(how, "peer", string(name), "err", err)
		select {
		case <-n.ctx.Done():
		case <-time.After(n.cfg.Redial):
		}
	}
}

// listen opens this node's listener at mine: tcp links, or the
// handshakes that move fabric links onto libfabric.
func (n *Node) listen(mine addr) error {
	raw, err := net.Listen("tcp", mine.hostPort)
	if err != nil {
		return fmt.Errorf("node: %s: listen: %w", n.cfg.Name, err)
	}
	if mine.fabric {
		n.acceptLink = func(ctx context.Context) (*fifo.Conn, error) {
			return fifo.AcceptFabric(ctx, raw, n.cfg.Secret, n.cfg.FIFO, fifo.WithProvider(mine.provider))
		}
		n.closeListener = func() { raw.Close() }
		return nil
	}
	ln, err := fifo.NewTCPListener(raw, n.cfg.Secret, n.cfg.FIFO)
	if err != nil {
		raw.Close()
		return fmt.Errorf("node: %s: %w", n.cfg.Name, err)
	}
	n.acceptLink, n.closeListener = ln.Accept, func() { ln.Close() }
	return nil
}

// dial keeps the link to peer name, at theirs, up: over tcp, or over
// libfabric with the provider the accepting peer names.
func (n *Node) dial(name protocol.NodeID, theirs addr) {
	n.keepLinked(name, "dial", true, func() (*fifo.Conn, error) {
		if theirs.fabric {
			return fifo.DialFabric(n.ctx, theirs.hostPort, n.cfg.Secret, n.cfg.FIFO, fifo.WithProvider(theirs.provider))
		}
		return fifo.DialTCP(n.ctx, theirs.hostPort, n.cfg.Secret, n.cfg.FIFO)
	})
}

// shmLink keeps the shared-memory link to peer name up, as the end that
// creates it (create) or the one that attaches, which speaks first as a
// dialer does.
func (n *Node) shmLink(name protocol.NodeID, link string, create bool) {
	n.keepLinked(name, "shared memory", !create, func() (*fifo.Conn, error) {
		if create {
			return fifo.ListenSHM(n.ctx, link, n.cfg.Secret, n.cfg.FIFO)
		}
		return fifo.DialSHM(n.ctx, link, n.cfg.Secret, n.cfg.FIFO)
	})
}

// hello exchanges hellos on a new link. The end that speaks first (first)
// is the one that dialed or attached; want is the peer expected ("" for a
// tcp acceptor, which takes any peer whose role is to dial it).
func (n *Node) hello(c *fifo.Conn, want protocol.NodeID, first bool) (protocol.NodeID, error) {
	ctx, cancel := context.WithTimeout(n.ctx, helloTimeout)
	defer cancel()
	mine := nodewire.AppendFrame(nil, &nodewire.Hello{Name: string(n.cfg.Name), Protocol: n.codec.Name})
	if first {
		if err := c.Send(ctx, mine); err != nil {
			return "", fmt.Errorf("node: hello to %s: %w", want, err)
		}
	}
	b, err := c.Recv(ctx, nil)
	if err != nil {
		return "", fmt.Errorf("node: hello: %w", err)
	}
	m, err := nodewire.Decode(b, nil)
	if err != nil {
		return "", fmt.Errorf("node: hello: %w", err)
	}
	h, ok := m.(*nodewire.Hello)
	if !ok {
		return "", fmt.Errorf("node: hello: got a %v", m.MessageCode())
	}
	name := protocol.NodeID(h.Name)
	role, known := n.roles[name]
	switch {
	case h.Protocol != n.codec.Name:
		return "", fmt.Errorf("%w: peer %s speaks protocol %q, not %q", ErrConfig, name, h.Protocol, n.codec.Name)
	case want != "" && name != want:
		return "", fmt.Errorf("%w: linked to reach %s, reached %s", ErrConfig, want, name)
	case want == "" && (!known || role != roleAccept):
		return "", fmt.Errorf("%w: %q is no peer that dials %s", ErrConfig, name, n.cfg.Name)
	}
	if !first {
		if err := c.Send(ctx, mine); err != nil {
			return "", fmt.Errorf("node: hello to %s: %w", name, err)
		}
	}
	return name, nil
}

// serve makes c the link to peer name (a new one replaces the old: the
// peer restarted) and hands its messages to the node until it breaks.
func (n *Node) serve(name protocol.NodeID, c *fifo.Conn) {
	n.mu.Lock()
	old := n.links[name]
	n.links[name], n.linked[name] = c, true
	n.mu.Unlock()
	if old != nil {
		old.Close()
	}
	n.log.Debug("linked", "peer", string(name))
	for {
		b, err := c.Recv(n.ctx, nil)
		if err != nil {
			n.log.Debug("link down", "peer", string(name), "err", err)
			n.drop(name, c)
			return
		}
		msg, err := n.codec.Decode(b)
		n.post(func() {
			if err != nil {
				n.stop(fmt.Errorf("node: %s: a frame from %s: %w", n.cfg.Name, name, err))
				return
			}
			n.deliver(name, msg)
		})
	}
}

// drop closes link c to name, if it is still the link.
func (n *Node) drop(name protocol.NodeID, c *fifo.Conn) {
	n.mu.Lock()
	if n.links[name] == c {
		delete(n.links, name)
	}
	n.mu.Unlock()
	c.Close()
}
