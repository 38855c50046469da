//go:build !linux

package fifo

import (
	"net"
	"time"
)

// setUserTimeout is Linux's TCP_USER_TIMEOUT; elsewhere keepalives alone
// detect a vanished peer.
func setUserTimeout(*net.TCPConn, time.Duration) error { return nil }
