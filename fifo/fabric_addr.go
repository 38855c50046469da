package fifo

import (
	"fmt"
	"net"
	"strings"
)

// FabricAddrPrefix starts an address on libfabric: "fabric:host:port",
// or "fabric:PROVIDER@host:port" to name the provider (see WithProvider).
// host:port is where the accepting end listens for the handshake that
// moves the connection onto the fabric.
const FabricAddrPrefix = "fabric:"

// ParseFabricAddr splits a fabric address into its provider ("" for
// libfabric's default) and the host:port its accepting end listens on.
func ParseFabricAddr(addr string) (provider, hostPort string, err error) {
	rest, ok := strings.CutPrefix(addr, FabricAddrPrefix)
	if !ok {
		return "", "", fmt.Errorf("%w: %q is not a fabric address (fabric:[PROVIDER@]host:port)", ErrConfig, addr)
	}
	hostPort = rest
	if before, after, named := strings.Cut(rest, "@"); named {
		provider, hostPort = before, after
		if provider == "" {
			return "", "", fmt.Errorf("%w: fabric address %q: an empty provider before '@' (leave the '@' out for the default)", ErrConfig, addr)
		}
	}
	if _, _, err := net.SplitHostPort(hostPort); err != nil {
		return "", "", fmt.Errorf("%w: fabric address %q: %v", ErrConfig, addr, err)
	}
	return provider, hostPort, nil
}
