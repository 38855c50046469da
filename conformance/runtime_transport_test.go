package conformance

import "testing"

// TestFabricTransport: the runtime target's transport names, as
// -transport takes them.
func TestFabricTransport(t *testing.T) {
	for _, tc := range []struct {
		transport, provider string
		ok                  bool
	}{
		{"fabric", "", true},
		{"fabric:shm", "shm", true},
		{"fabric:tcp;ofi_rxm", "tcp;ofi_rxm", true},
		{"fabric:", "", true},
		{"mem", "", false},
		{"shm", "", false},
		{"fabricx", "", false},
	} {
		p, ok := FabricTransport(tc.transport)
		if p != tc.provider || ok != tc.ok {
			t.Errorf("FabricTransport(%q) = %q, %v; want %q, %v", tc.transport, p, ok, tc.provider, tc.ok)
		}
	}
}
