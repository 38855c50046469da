package node

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/rrefkit/rref/fifo"
	"github.com/rrefkit/rref/protocol"
)

// shmPrefix marks a node on this host's shared memory: "shm:GROUP" links
// over shared memory to the other nodes of GROUP, and dials the tcp nodes.
const shmPrefix = "shm:"

// shmLinkHashBytes of a pair's hash name its shared memory: 64 bits, so
// that the pairs of a large group never collide by chance.
const shmLinkHashBytes = 8

// addr is a node's address, parsed once.
type addr struct {
	shmGroup string // "" for tcp and fabric
	hostPort string // "" for shared memory
	fabric   bool   // over libfabric, through provider ("" for its default)
	provider string
}

func parseAddr(name protocol.NodeID, s string) (addr, error) {
	switch {
	case strings.HasPrefix(s, shmPrefix):
		group := strings.TrimPrefix(s, shmPrefix)
		if group == "" || strings.IndexByte(group, 0) >= 0 {
			return addr{}, fmt.Errorf("%w: node %s: %q names no shared-memory group (shm:GROUP)", ErrConfig, name, s)
		}
		return addr{shmGroup: group}, nil
	case strings.HasPrefix(s, fifo.FabricAddrPrefix):
		provider, hostPort, err := fifo.ParseFabricAddr(s)
		if err != nil {
			return addr{}, fmt.Errorf("%w: node %s: %v", ErrConfig, name, err)
		}
		return addr{fabric: true, provider: provider, hostPort: hostPort}, nil
	case s == "":
		return addr{}, fmt.Errorf("%w: node %s has no address", ErrConfig, name)
	}
	return addr{hostPort: s}, nil
}

// linkRole is what a node does for its link to one peer.
type linkRole uint8

const (
	roleAccept    linkRole = iota // the peer dials this node's tcp listener
	roleDial                      // this node dials the peer's tcp listener
	roleSHMCreate                 // this node makes the pair's shared memory
	roleSHMAttach                 // this node attaches to it
)

// roleOf is what node self does for its link to peer: two nodes of one
// shared-memory group link there, the lower name creating; a node without
// a tcp listener dials the one with it; of two tcp nodes, or two fabric
// nodes, the higher name dials. Fabric nodes link only to fabric nodes, as
// workers do. Every node computes the same roles from the same list.
func roleOf(self, peer protocol.NodeID, mine, theirs addr) (linkRole, error) {
	switch {
	case mine.fabric != theirs.fabric:
		return 0, fmt.Errorf("%w: %s and %s: fabric nodes link only to fabric nodes", ErrConfig, self, peer)
	case mine.shmGroup != "" && mine.shmGroup == theirs.shmGroup:
		if self < peer {
			return roleSHMCreate, nil
		}
		return roleSHMAttach, nil
	case mine.shmGroup != "" && theirs.shmGroup != "":
		return 0, fmt.Errorf("%w: %s (shm:%s) and %s (shm:%s) share no transport: shared-memory nodes of different groups cannot link",
			ErrConfig, self, mine.shmGroup, peer, theirs.shmGroup)
	case mine.shmGroup != "":
		return roleDial, nil
	case theirs.shmGroup != "":
		return roleAccept, nil
	case self > peer:
		return roleDial, nil
	}
	return roleAccept, nil
}

// shmLinkName names the shared memory of the link between a and b in
// group: the same at both ends, and apart from another protocol's.
func shmLinkName(protocolName, group string, a, b protocol.NodeID) string {
	lo, hi := a, b
	if hi < lo {
		lo, hi = hi, lo
	}
	sum := sha256.Sum256([]byte(protocolName + "\x00" + string(lo) + "\x00" + string(hi)))
	return "rref-node-" + group + "-" + hex.EncodeToString(sum[:shmLinkHashBytes])
}
