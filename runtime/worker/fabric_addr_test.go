package worker

import (
	"context"
	"strings"
	"testing"
)

// TestFabricAddresses: "fabric:[PROVIDER@]host:port" is split as written,
// and a malformed one is refused by Start, naming the member, before
// anything listens or dials (in a build without libfabric too).
func TestFabricAddresses(t *testing.T) {
	for _, tc := range []struct{ addr, provider, hostPort string }{
		{"fabric:127.0.0.1:7000", "", "127.0.0.1:7000"},
		{"fabric:shm@127.0.0.1:7000", "shm", "127.0.0.1:7000"},
		{"fabric:verbs;ofi_rxm@[fe80::1]:7000", "verbs;ofi_rxm", "[fe80::1]:7000"},
	} {
		p, hp, err := parseFabricAddr(tc.addr)
		if err != nil || p != tc.provider || hp != tc.hostPort {
			t.Errorf("%q: provider %q, address %q, %v; want %q, %q", tc.addr, p, hp, err, tc.provider, tc.hostPort)
		}
	}
	for _, tc := range []struct{ addr, why string }{
		{"fabric:@127.0.0.1:7000", "empty provider"},
		{"fabric:shm@", "missing port"},
		{"fabric:shm@127.0.0.1", "missing port"},
		{"fabric:", "missing port"},
	} {
		peers := []Peer{{"A", "fabric:127.0.0.1:1"}, {"B", tc.addr}}
		_, err := Start(context.Background(), "A", peers, secret, Config{Logger: quiet})
		if err == nil || !strings.Contains(err.Error(), tc.why) || !strings.Contains(err.Error(), "B") {
			t.Errorf("Start with %q: %v; want an error naming B and saying %q", tc.addr, err, tc.why)
		}
	}
}
