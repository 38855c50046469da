//go:build !(rreffabric && cgo && linux)

package bench

import (
	"time"

	"github.com/rrefkit/rref/fifo"
)

// fabricFloor needs the libfabric provider's build (fabric_floor.go).
func fabricFloor(provider string, size, iters int) ([]time.Duration, error) {
	return nil, fifo.ErrNoFabric
}
