package node

import (
	"errors"
	"testing"

	"github.com/rrefkit/rref/protocol"
)

// TestRolesComplement: the two ends of every pair, whatever their
// transports and names, agree: one dials and the other accepts, or one
// creates the shared memory and the other attaches, or both refuse.
func TestRolesComplement(t *testing.T) {
	addrs := []string{"127.0.0.1:1", "127.0.0.1:2", "shm:g", "shm:h", "fabric:127.0.0.1:3", "fabric:shm@127.0.0.1:4"}
	names := []protocol.NodeID{"a", "b", "c"}
	partner := map[linkRole]linkRole{roleDial: roleAccept, roleAccept: roleDial, roleSHMCreate: roleSHMAttach, roleSHMAttach: roleSHMCreate}
	pairs := 0
	for _, x := range names {
		for _, y := range names {
			if x == y {
				continue
			}
			for _, sx := range addrs {
				for _, sy := range addrs {
					ax, err := parseAddr(x, sx)
					if err != nil {
						t.Fatal(err)
					}
					ay, err := parseAddr(y, sy)
					if err != nil {
						t.Fatal(err)
					}
					rx, errx := roleOf(x, y, ax, ay)
					ry, erry := roleOf(y, x, ay, ax)
					pairs++
					switch {
					case errx != nil || erry != nil:
						if !errors.Is(errx, ErrConfig) || !errors.Is(erry, ErrConfig) {
							t.Errorf("%s=%s, %s=%s: %v and %v, want both ErrConfig", x, sx, y, sy, errx, erry)
						}
					case partner[rx] != ry:
						t.Errorf("%s=%s, %s=%s: roles %d and %d do not match", x, sx, y, sy, rx, ry)
					}
				}
			}
		}
	}
	if pairs == 0 {
		t.Fatal("no pair checked")
	}
}
