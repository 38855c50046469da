//go:build !linux

package fifo

import "time"

// Without futexes the reader sleeps briefly and re-polls.
func futexWait(addr *uint32, val uint32, timeout time.Duration) {
	time.Sleep(min(timeout, 50*time.Microsecond))
}
func futexWake(addr *uint32) {}
