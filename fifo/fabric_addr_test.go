package fifo

import (
	"errors"
	"testing"
)

func TestParseFabricAddr(t *testing.T) {
	for addr, want := range map[string][2]string{
		"fabric:127.0.0.1:7000":               {"", "127.0.0.1:7000"},
		"fabric:tcp;ofi_rxm@10.0.0.1:7000":    {"tcp;ofi_rxm", "10.0.0.1:7000"},
		"fabric:verbs;ofi_rxm@[fe80::1]:7000": {"verbs;ofi_rxm", "[fe80::1]:7000"},
		"fabric:shm@localhost:1":              {"shm", "localhost:1"},
	} {
		p, hp, err := ParseFabricAddr(addr)
		if err != nil || p != want[0] || hp != want[1] {
			t.Errorf("%s: %q %q %v, want %q %q", addr, p, hp, err, want[0], want[1])
		}
	}
	for _, addr := range []string{"", "127.0.0.1:7000", "fabric:", "fabric:@127.0.0.1:1", "fabric:shm@", "fabric:nohost"} {
		if _, _, err := ParseFabricAddr(addr); !errors.Is(err, ErrConfig) {
			t.Errorf("%q: %v, want ErrConfig", addr, err)
		}
	}
}
