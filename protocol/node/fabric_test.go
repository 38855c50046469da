//go:build rreffabric && cgo && linux

package node_test

import (
	"slices"
	"testing"

	"github.com/rrefkit/rref/fifo"
)

// TestOverFabric: the ping-pong and the restart over libfabric, with its
// default provider and with each provider CI tests named in the addresses.
func TestOverFabric(t *testing.T) {
	available, err := fifo.FabricProviders()
	if err != nil {
		t.Fatal(err)
	}
	for _, provider := range []string{"", "shm", "tcp;ofi_rxm"} {
		name := provider
		if name == "" {
			name = "default"
		}
		t.Run(name, func(t *testing.T) {
			if provider != "" && !slices.Contains(available, provider) {
				t.Skipf("libfabric here has no %s: %v", provider, available)
			}
			addrs := func(t *testing.T) []string {
				out := freeAddrs(t, 2)
				for i, a := range out {
					if provider != "" {
						a = provider + "@" + a
					}
					out[i] = fifo.FabricAddrPrefix + a
				}
				return out
			}
			t.Run("ping-pong", func(t *testing.T) { testPingPong(t, addrs(t)) })
			t.Run("restart", func(t *testing.T) { testRestartKeepsTheRecord(t, addrs(t)) })
		})
	}
}
