package worker

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/rrefkit/rref/fifo"
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
	// Addr is "host:port" for tcp, or "shm:GROUP" for shared memory with the
	// other "shm:GROUP" peers on this host.
	Addr string
}

// Start starts worker self of a group spread over processes or hosts. Every
// member must be given the same peer list, in the same order, and the same
// secret. Each pair connects once: the member listed first accepts (tcp) or
// creates the shared file (shm), the other dials. Start returns when every
// peer is connected, or fails when ctx ends first.
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
	if me < 0 {
		return nil, fmt.Errorf("%w %q: not among the peers", ErrUnknownWorker, self)
	}
	w := newWorker(names, core.WorkerID(me+1), cfg)
	if cfg.Setup != nil {
		cfg.Setup(w)
	}
	fail := func(err error) (*Worker, error) {
		w.Close()
		return nil, err
	}
	var ln net.Listener
	myAddr := peers[me].Addr
	needAccept := 0
	for j := me + 1; j < len(peers); j++ {
		if !isSHM(peers[j].Addr) || !isSHM(myAddr) {
			needAccept++
		}
	}
	if needAccept > 0 && !isSHM(myAddr) {
		var err error
		if ln, err = net.Listen("tcp", myAddr); err != nil {
			return fail(fmt.Errorf("worker: listen on %s: %w", myAddr, err))
		}
		defer ln.Close()
	}
	errc := make(chan error, len(peers))
	// Accept from the members listed after this one.
	go func() {
		for k := 0; k < needAccept; k++ {
			conn, err := fifo.AcceptTCP(ctx, ln, secret, w.cfg.FIFO)
			if err != nil {
				errc <- err
				return
			}
			id, err := readHello(ctx, conn, len(peers))
			if err != nil || id <= me {
				conn.Close()
				errc <- fmt.Errorf("worker: a peer introduced itself as #%d: %v", id, err)
				return
			}
			w.attach(core.WorkerID(id+1), conn)
			errc <- nil
		}
	}()
	pending := needAccept
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
				return fail(err)
			}
			w.attach(core.WorkerID(j+1), conn)
			continue
		}
		if j > me {
			continue // it dials us
		}
		conn, err := dialRetry(ctx, peers[j].Addr, secret, w.cfg.FIFO)
		if err != nil {
			return fail(err)
		}
		if err := conn.Send(ctx, binary.LittleEndian.AppendUint32(nil, uint32(me))); err != nil {
			conn.Close()
			return fail(err)
		}
		w.attach(core.WorkerID(j+1), conn)
	}
	for ; pending > 0; pending-- {
		select {
		case err := <-errc:
			if err != nil {
				return fail(err)
			}
		case <-ctx.Done():
			return fail(fmt.Errorf("worker: not every peer connected: %w", ctx.Err()))
		}
	}
	return w, nil
}

func isSHM(addr string) bool { return strings.HasPrefix(addr, "shm:") }

func readHello(ctx context.Context, conn *fifo.Conn, n int) (int, error) {
	b, err := conn.Recv(ctx, nil)
	if err != nil {
		return -1, err
	}
	if len(b) != 4 {
		return -1, errors.New("malformed hello")
	}
	id := int(binary.LittleEndian.Uint32(b))
	if id >= n {
		return -1, errors.New("hello names no member")
	}
	return id, nil
}

// dialRetry dials until the peer listens or ctx ends: members of a group
// start in any order.
func dialRetry(ctx context.Context, addr string, secret []byte, cfg fifo.Config) (*fifo.Conn, error) {
	wait := time.Millisecond
	for {
		conn, err := fifo.DialTCP(ctx, addr, secret, cfg)
		if err == nil || errors.Is(err, fifo.ErrAuth) || ctx.Err() != nil {
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
