package freeport

import (
	"net"
	"testing"
)

// TestLoopbackDistinct: addresses picked together never repeat, which
// picking them one after another (listen, close, listen) does not promise.
func TestLoopbackDistinct(t *testing.T) {
	for range 20 {
		addrs, err := Loopback(16)
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		for _, a := range addrs {
			if seen[a] {
				t.Fatalf("%s picked twice in %v", a, addrs)
			}
			seen[a] = true
		}
	}
}

// TestFreeAndTaken: a picked address can be listened on, and listening on
// it again is reported as in use.
func TestFreeAndTaken(t *testing.T) {
	ports, err := Ports(1)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:"+ports[0])
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, err = net.Listen("tcp", ln.Addr().String())
	if !IsAddrInUse(err) {
		t.Fatalf("listen again: %v, want address in use", err)
	}
}
