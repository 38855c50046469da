//go:build linux

package fifo

import (
	"net"
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
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return false
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return false
	}
	broken := false
	rc.Control(func(fd uintptr) {
		fds := []unix.PollFd{{Fd: int32(fd)}} // POLLERR and POLLHUP are always reported
		if n, err := unix.Poll(fds, 0); err == nil && n > 0 {
			broken = fds[0].Revents&(unix.POLLERR|unix.POLLHUP) != 0
		}
	})
	return broken
}
