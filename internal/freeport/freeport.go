// Package freeport picks loopback addresses for members that must be
// told each other's addresses before any of them listens: tests, the soak
// and the benchmarks start groups of processes that way.
//
// Listening on port 0 and closing gives a port the kernel may hand out
// again at once, so ports picked one after another can repeat; Loopback
// holds every listener open until all are picked, so the n addresses it
// returns are distinct. Another process may still take one before its
// member listens: callers that cannot afford that start again on new
// addresses when a member reports its address in use (IsAddrInUse).
package freeport

import (
	"errors"
	"fmt"
	"net"
	"syscall"
)

// Loopback returns n distinct 127.0.0.1:port addresses, free a moment ago.
func Loopback(n int) ([]string, error) {
	lns := make([]net.Listener, 0, n)
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	out := make([]string, 0, n)
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("freeport: %w", err)
		}
		lns = append(lns, ln)
		out = append(out, ln.Addr().String())
	}
	return out, nil
}

// Ports is Loopback's ports alone, as decimal strings.
func Ports(n int) ([]string, error) {
	addrs, err := Loopback(n)
	if err != nil {
		return nil, err
	}
	for i, a := range addrs {
		_, port, _ := net.SplitHostPort(a)
		addrs[i] = port
	}
	return addrs, nil
}

// IsAddrInUse reports whether err says an address was taken.
func IsAddrInUse(err error) bool { return errors.Is(err, syscall.EADDRINUSE) }
