//go:build linux

package fifo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// shmSeals are the seals a segment carries before it is handed over: it can
// neither shrink nor grow, and no seal can be added (F_SEAL_SEAL). A
// dialer requires the first two.
const (
	shmSeals     = unix.F_SEAL_SHRINK | unix.F_SEAL_GROW | unix.F_SEAL_SEAL
	shmSealsNeed = unix.F_SEAL_SHRINK | unix.F_SEAL_GROW
	// maxMemfdName is memfd_create's limit on a name (249 bytes, which
	// /proc shows as "memfd:NAME"): a name for people reading it.
	maxMemfdName = 249
	// shmRightsRoom is how many descriptors a verdict's control message
	// has room for: one is expected, and any more a hostile listener
	// sends are received to be closed, not truncated.
	shmRightsRoom = 4
)

// A dialer dials again from 200 us, as often as the old file-based dialer
// polled for the file, doubling to 10 ms: a listener that appears is
// joined within 10 ms, and waiting costs a few dials per second.
const (
	shmDialBackoffMin = 200 * time.Microsecond
	shmDialBackoffMax = 10 * time.Millisecond
)

func listenSHM(ctx context.Context, name string, secret []byte, c Config) (*Conn, error) {
	addr := shmSocket(name, int(selfUID()))
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: addr, Net: "unix"})
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			return nil, fmt.Errorf("fifo: shared memory %q: a live process already listens on %s (another group of the same name?): %w", name, addr, err)
		}
		return nil, fmt.Errorf("fifo: shared memory %q: listen: %w", name, err)
	}
	o := tcpOptionsOf(nil)
	secret = append([]byte(nil), secret...)
	a := newAcceptor(ln, true, o, func(ctx context.Context, nc net.Conn, progressed func()) (*pending, error) {
		return shmAccept(ctx, nc, name, secret, c, o.timeout, progressed)
	})
	defer a.close()
	for {
		p, err := a.next(ctx)
		if err != nil {
			return nil, fmt.Errorf("fifo: no peer attached to shared memory %q: %w", name, err)
		}
		if conn, err := handOver(p, name, secret, c); err == nil {
			return conn, nil
		}
		// The dialer went away in the middle: wait for another.
	}
}

// shmAccept is the listener's handshake with one connection: the peer's
// user, then the challenge-response.
func shmAccept(ctx context.Context, nc net.Conn, name string, secret []byte, c Config, timeout time.Duration, progressed func()) (*pending, error) {
	uc, ok := nc.(*net.UnixConn)
	if !ok {
		return nil, fmt.Errorf("fifo: shared memory %q: not a unix connection", name)
	}
	cred, err := peerCred(uc)
	if err != nil {
		return nil, fmt.Errorf("fifo: shared memory %q: %w", name, err)
	}
	if err := checkPeerUID(cred.Uid, selfUID(), "dialer", name); err != nil {
		return nil, err
	}
	peer := fmt.Sprintf("the dialer of %q (pid %d)", name, cred.Pid)
	end := limit(ctx, nc, timeout)
	s := shake{ctx: ctx, nc: nc, peer: peer, secret: secret, cfg: c, transport: "shm", progressed: progressed}
	t, err := s.accept()
	if err != nil {
		end()
		return nil, err
	}
	return &pending{conn: nc, raw: nc, peer: peer, t: t, end: end}, nil
}

// handOver creates the segment for p's dialer, sends it and waits until
// the dialer has mapped it.
func handOver(p *pending, name string, secret []byte, c Config) (_ *Conn, err error) {
	defer func() {
		if err != nil {
			p.drop()
		}
	}()
	lay := layoutFor(c)
	fd, err := newSegment(name, lay.total)
	if err != nil {
		return nil, err
	}
	mem, err := unix.Mmap(fd, 0, lay.total, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("fifo: shared memory %q: mmap: %w", name, err)
	}
	unmap := func() error { return unix.Munmap(mem) }
	tx, rx, txb, rxb, err := sides(mem, c, 0)
	if err != nil {
		unix.Close(fd)
		unmap()
		return nil, err
	}
	tok := regionToken(secret, p.t)
	rx.writeInit(tok)
	tx.writeInit(tok)
	uc := p.conn.(*net.UnixConn)
	_, _, err = uc.WriteMsgUnix([]byte{verdictAccepted}, unix.UnixRights(fd), nil)
	unix.Close(fd) // the message in flight holds its own reference
	var ack [1]byte
	if err == nil {
		_, err = io.ReadFull(uc, ack[:])
	}
	if err == nil && ack[0] != verdictAccepted {
		err = fmt.Errorf("%w: %s did not attach", ErrAuth, p.peer)
	}
	if err == nil {
		err = p.finish()
	}
	if err != nil {
		unmap()
		return nil, fmt.Errorf("fifo: shared memory %q: hand-over to %s: %w", name, p.peer, err)
	}
	l := newMemLink(c, tx, rx, txb, rxb, true, unmap)
	l.watchPeer(p.conn) // kept open: its end is the peer's death
	return newConn(l, c), nil
}

// newSegment creates a sealed memfd of size bytes.
func newSegment(name string, size int) (int, error) {
	label := "rrefkit-fifo:" + name
	if len(label) > maxMemfdName {
		label = label[:maxMemfdName]
	}
	fd, err := unix.MemfdCreate(label, unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return -1, fmt.Errorf("fifo: shared memory %q: memfd_create: %w", name, err)
	}
	if err := unix.Ftruncate(fd, int64(size)); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("fifo: shared memory %q: size the segment: %w", name, err)
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, shmSeals); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("fifo: shared memory %q: seal the segment: %w", name, err)
	}
	return fd, nil
}

func peerCred(uc *net.UnixConn) (*unix.Ucred, error) {
	rc, err := uc.SyscallConn()
	if err != nil {
		return nil, err
	}
	var cred *unix.Ucred
	var cerr error
	if err := rc.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return nil, err
	}
	if cerr != nil {
		return nil, fmt.Errorf("SO_PEERCRED: %w", cerr)
	}
	return cred, nil
}

func dialSHM(ctx context.Context, name string, secret []byte, c Config) (*Conn, error) {
	addr := shmSocket(name, int(selfUID()))
	wait := shmDialBackoffMin
	for {
		conn, err := dialSHMOnce(ctx, addr, name, secret, c)
		if err == nil {
			return conn, nil
		}
		if errors.Is(err, ErrAuth) || !shmRetry(err) {
			return nil, err
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("fifo: shared memory %q: no listener took this end (last: %v): %w", name, err, ctx.Err())
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("fifo: shared memory %q: no listener took this end (last: %v): %w", name, err, ctx.Err())
		}
		wait = min(2*wait, shmDialBackoffMax)
	}
}

// shmRetry reports whether a failed attempt may pass if made again: no
// listener yet (or its backlog full), or one that closed this connection
// before answering (it took another dialer, or was busy), or timed out.
func shmRetry(err error) bool {
	var ne net.Error
	return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.EAGAIN) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) || errors.Is(err, io.EOF) ||
		(errors.As(err, &ne) && ne.Timeout())
}

func dialSHMOnce(ctx context.Context, addr, name string, secret []byte, c Config) (*Conn, error) {
	var d net.Dialer
	nc, err := d.DialContext(ctx, "unix", addr)
	if err != nil {
		return nil, fmt.Errorf("fifo: shared memory %q: dial: %w", name, err)
	}
	kept := false
	defer func() {
		if !kept {
			nc.Close()
		}
	}()
	uc := nc.(*net.UnixConn)
	cred, err := peerCred(uc)
	if err != nil {
		return nil, fmt.Errorf("fifo: shared memory %q: %w", name, err)
	}
	if err := checkPeerUID(cred.Uid, selfUID(), "listener", name); err != nil {
		return nil, err
	}
	end := limit(ctx, nc, handshakeTimeout)
	s := shake{ctx: ctx, nc: nc, peer: fmt.Sprintf("the listener of %q (pid %d)", name, cred.Pid), secret: secret, cfg: c, transport: "shm"}
	conn, err := attach(&s, uc, name, c)
	if eerr := end(); err == nil && eerr != nil {
		conn.Close()
		err = fmt.Errorf("fifo: shared memory %q: %w", name, eerr)
	}
	if err != nil {
		return nil, err
	}
	conn.l.(*memLink).watchPeer(nc) // kept open: its end is the peer's death
	kept = true
	return conn, nil
}

// attach is the dialer's side over the socket: the handshake, the memfd,
// its checks and mapping, and the answer.
func attach(s *shake, uc *net.UnixConn, name string, c Config) (*Conn, error) {
	t, err := s.dial()
	if err != nil {
		return nil, err
	}
	fd, err := recvSegment(s, uc)
	if err != nil {
		return nil, err
	}
	lay := layoutFor(c)
	mem, err := mapSegment(fd, lay.total, s.peer)
	if err != nil {
		return nil, err
	}
	unmap := func() error { return unix.Munmap(mem) }
	tx, rx, txb, rxb, err := sides(mem, c, 1)
	if err == nil {
		tok := regionToken(s.secret, t)
		if err = rx.checkInit(tok); err == nil {
			err = tx.checkInit(tok)
		}
	}
	if err == nil {
		err = s.write([]byte{verdictAccepted}, "answer")
	}
	if err != nil {
		unmap()
		return nil, err
	}
	return newConn(newMemLink(c, tx, rx, txb, rxb, true, unmap), c), nil
}

// recvSegment reads the verdict and the one descriptor that comes with it.
func recvSegment(s *shake, uc *net.UnixConn) (int, error) {
	var v [1]byte
	oob := make([]byte, unix.CmsgSpace(shmRightsRoom*4))
	n, oobn, flags, _, err := uc.ReadMsgUnix(v[:], oob)
	var fds []int
	if msgs, perr := unix.ParseSocketControlMessage(oob[:oobn]); perr == nil {
		for i := range msgs {
			if got, err := unix.ParseUnixRights(&msgs[i]); err == nil {
				fds = append(fds, got...)
			}
		}
	}
	closeAll := func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	}
	switch {
	case err != nil:
		closeAll()
		return -1, s.ioErr(err, 0, 1, "verdict")
	case n == 0:
		closeAll()
		return -1, s.ioErr(io.EOF, 0, 1, "verdict")
	case v[0] != verdictAccepted:
		closeAll()
		return -1, fmt.Errorf("%w by %s: it does not accept this end's proof", ErrAuth, s.peer)
	case flags&unix.MSG_CTRUNC != 0 || len(fds) != 1:
		closeAll()
		return -1, fmt.Errorf("%w: %s sent %d descriptors with its verdict, want 1", ErrAuth, s.peer, len(fds))
	}
	return fds[0], nil
}

// mapSegment checks a received segment, maps it and closes fd: a regular
// file (a memfd) of this user, of the layout's size, sealed against
// shrinking and growing, so that no one can cut it under the mapping.
func mapSegment(fd, size int, peer string) ([]byte, error) {
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, fmt.Errorf("fifo: fstat the segment from %s: %w", peer, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, fmt.Errorf("%w: %s sent a descriptor that is not a memory file (mode %#o)", ErrAuth, peer, st.Mode)
	}
	if st.Uid != selfUID() {
		return nil, fmt.Errorf("%w: %s sent a segment owned by uid %d, not this process's %d", ErrAuth, peer, st.Uid, selfUID())
	}
	if st.Size != int64(size) {
		return nil, fmt.Errorf("%w: %s sent a segment of %d bytes, want %d", ErrAuth, peer, st.Size, size)
	}
	seals, err := unix.FcntlInt(uintptr(fd), unix.F_GET_SEALS, 0)
	if err != nil || seals&shmSealsNeed != shmSealsNeed {
		return nil, fmt.Errorf("%w: %s sent a segment not sealed against shrinking and growing (seals %#x, %v)", ErrAuth, peer, seals, err)
	}
	mem, err := unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("fifo: map the segment from %s: %w", peer, err)
	}
	return mem, nil
}
