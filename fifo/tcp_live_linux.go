//go:build linux

package fifo

import (
	"errors"
	"net"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// setUserTimeout bounds how long sent data may stay unacknowledged before
// the kernel drops the connection (TCP_USER_TIMEOUT): a peer host that
// vanished while we were sending is declared dead after d, not after the
// default retransmission schedule of about 15 minutes.
func setUserTimeout(tc *net.TCPConn, d time.Duration) error {
	rc, err := tc.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	err = rc.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT, int(d.Milliseconds()))
	})
	if err != nil {
		return err
	}
	return serr
}

// socketBroken reports whether the kernel has given c's connection up: a
// reset received (POLLERR) or both directions shut (POLLHUP). A peer's
// orderly FIN alone is not a break: the close frame before it, or its
// absence, is the reader's to judge. It makes no read, so it never takes
// bytes from the link's reader.
func socketBroken(c net.Conn) bool {
	return pollSocket(c, 0)&(unix.POLLERR|unix.POLLHUP) != 0 // always reported
}

// pollSocket polls c's socket for events without waiting and returns what
// it reports: 0 for a connection that is not tcp, or closed.
func pollSocket(c net.Conn, events int16) int16 {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return 0
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return 0
	}
	var revents int16
	rc.Control(func(fd uintptr) {
		fds := []unix.PollFd{{Fd: int32(fd), Events: events}}
		if n, err := unix.Poll(fds, 0); err == nil && n > 0 {
			revents = fds[0].Revents
		}
	})
	return revents
}

// drainsIdle: socketReadable works here, so tcp ends drain their idle
// sockets (idleDrains).
const drainsIdle = true

// socketReadable reports whether c's socket holds bytes no one has read
// (or a break, which a read then meets). Like socketBroken, it reads
// nothing.
func socketReadable(c net.Conn) bool { return pollSocket(c, unix.POLLIN) != 0 }

// errResetWhileClosing: the connection was reset before the close frame
// left.
var errResetWhileClosing = errors.New("connection reset before the close frame left")

// sentPoll is how often finishWrites looks at the connection's state: a
// peer that reads takes what is queued within microseconds, and a slow one
// is given up at the deadline anyway.
const sentPoll = 20 * time.Microsecond

// finishWrites ends c's sending side with a FIN and waits until the kernel
// has sent everything written before it, or until deadline; it reports a
// connection found reset meanwhile. Close needs this: closing a socket
// with the peer's frames unread resets the connection, and a reset drops
// what this end's kernel has not yet sent (the peer's window may be full).
// What was sent has reached the peer on loopback; on a real network a
// segment lost at that moment is not sent again, and the peer sees a break
// rather than a close. Waiting for the peer's acknowledgement instead
// would cost its delayed ACK, milliseconds per close, since the peer has
// nothing to send back.
func finishWrites(c net.Conn, deadline time.Time) error {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return nil
	}
	if err := tc.CloseWrite(); err != nil {
		return err
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return nil
	}
	for {
		var info *unix.TCPInfo
		if rc.Control(func(fd uintptr) {
			info, err = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
		}) != nil || err != nil {
			return nil // nothing to learn: the close goes on
		}
		switch {
		case info.State == unix.BPF_TCP_CLOSE && info.Notsent_bytes > 0:
			return errResetWhileClosing
		case info.Notsent_bytes == 0:
			return nil
		case time.Now().After(deadline):
			// The peer took nothing for closeWait: closing now resets the
			// connection and drops what is unsent, the close frame with
			// it, so the peer must see a break, not a clean close.
			return os.ErrDeadlineExceeded
		}
		time.Sleep(sentPoll)
	}
}

// unreadBytes is how many bytes c's peer sent that no read has taken yet
// (SIOCINQ): 0 for a connection without a socket, or closed. It reads
// nothing, so a handshake reading c meanwhile misses nothing.
func unreadBytes(c net.Conn) int {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return 0
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return 0
	}
	n := 0
	rc.Control(func(fd uintptr) {
		if v, err := unix.IoctlGetInt(int(fd), unix.SIOCINQ); err == nil {
			n = v
		}
	})
	return n
}
