//go:build !linux

package fifo

import (
	"context"
	"fmt"
)

// The hand-over needs memfd_create, SO_PEERCRED and abstract Unix
// sockets: elsewhere there is no shared-memory provider, rather than one
// whose segment another user could find by its name.

func listenSHM(context.Context, string, []byte, Config) (*Conn, error) {
	return nil, fmt.Errorf("%w: shared memory connections need linux", ErrConfig)
}

func dialSHM(context.Context, string, []byte, Config) (*Conn, error) {
	return nil, fmt.Errorf("%w: shared memory connections need linux", ErrConfig)
}
