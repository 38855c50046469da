//go:build !linux

package fifo

import (
	"net"
	"time"
)

// setUserTimeout is Linux's TCP_USER_TIMEOUT; elsewhere keepalives alone
// detect a vanished peer.
func setUserTimeout(*net.TCPConn, time.Duration) error { return nil }

// socketBroken is Linux's poll for a reset; elsewhere an idle end learns of
// a break at its next call.
func socketBroken(net.Conn) bool { return false }

// drainsIdle: without socketReadable an idle end reads its socket only at
// its next call, and no goroutine looks for it (see idleDrains).
const drainsIdle = false

// socketReadable is Linux's poll for unread bytes; elsewhere an idle end
// reads its socket at its next call (drainIdle does nothing).
func socketReadable(net.Conn) bool { return false }

// finishWrites sends a FIN after what c has written; only Linux waits
// for its acknowledgement, so elsewhere a peer that reads slowly may see
// a reset, not a close.
func finishWrites(c net.Conn, _ time.Time) error {
	if tc, ok := c.(*net.TCPConn); ok {
		return tc.CloseWrite()
	}
	return nil
}

// unreadBytes is Linux's count of a socket's unread bytes; elsewhere a
// handshake counts as having sent its hello only once it was read (see
// admission).
func unreadBytes(net.Conn) int { return 0 }
