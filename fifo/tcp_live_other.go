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
