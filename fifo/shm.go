package fifo

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
)

// SHMDir is where tools that map shared files of their own (the
// benchmarks' floors) create them. The shm provider itself creates no
// file: its segments are memfds handed over a socket.
const SHMDir = "/dev/shm"

// A shared-memory connection is handed over, not found. The listener
// listens on a Unix socket in the abstract namespace (shmSocket), which has
// no file and vanishes with its process: nothing is left behind after a
// kill -9, and a restart under the same name works at once. Each end
// checks with SO_PEERCRED that the other runs as the same user, then they
// run the handshake (handshake.go) over the socket. Only then does the
// listener create the segment, with memfd_create: anonymous, so no other
// process can open it by name, sized to the layout and sealed against
// shrinking and growing (so no one can truncate it under a mapping, which
// would kill the mapper with SIGBUS). It stamps the rings' first lines with
// a token both ends derive from this handshake and sends the memfd with
// SCM_RIGHTS; the dialer checks its owner, size and seals, maps it,
// checks the stamps and answers; the socket is then closed.
//
// The abstract namespace is one per network namespace: both processes must
// share one (containers with their own network namespace do not).

// ListenSHM waits for one peer to attach with DialSHM to connection name,
// with the same secret and geometry, and returns this end. Strays that
// connect meanwhile (another user, a process without the secret, garbage,
// a silent connection) are dropped; ListenSHM waits until ctx ends. A name
// in use by a live listener of another group is an error at once.
func ListenSHM(ctx context.Context, name string, secret []byte, cfg Config) (*Conn, error) {
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if err := checkSHMName(name); err != nil {
		return nil, err
	}
	return listenSHM(ctx, name, secret, c)
}

// DialSHM attaches to connection name, created by ListenSHM with the same
// secret and geometry. It waits, dialing again, until the listener
// appears or ctx ends: members start in any order. A refusal (another
// user's listener, a wrong secret or geometry, a segment of the wrong
// size, owner or seals) wraps ErrAuth and is returned at once.
func DialSHM(ctx context.Context, name string, secret []byte, cfg Config) (*Conn, error) {
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if err := checkSHMName(name); err != nil {
		return nil, err
	}
	return dialSHM(ctx, name, secret, c)
}

// maxSHMName bounds a socket name: sun_path holds 108 bytes, the first of
// an abstract name being its NUL. Longer names are hashed.
const maxSHMName = 107

func checkSHMName(name string) error {
	if name == "" || strings.IndexByte(name, 0) >= 0 {
		return fmt.Errorf("%w: a shared-memory connection needs a name without NUL bytes, not %q", ErrConfig, name)
	}
	return nil
}

// shmSocket is the abstract socket name of connection name for user uid
// ('@' is Go's spelling of the leading NUL). The uid keeps two users' names
// apart; another user can still take a name first, which only makes
// ListenSHM fail clearly and DialSHM refuse that user's listener.
func shmSocket(name string, uid int) string {
	s := fmt.Sprintf("@rrefkit-fifo/%d/%s", uid, name)
	if len(s) > maxSHMName {
		sum := sha256.Sum256([]byte(name))
		s = fmt.Sprintf("@rrefkit-fifo/%d/sha256:%s", uid, hex.EncodeToString(sum[:16]))
	}
	return s
}

// checkPeerUID refuses a peer (the listener or dialer of shm connection
// name) that runs as another user than this process: a segment is only
// ever shared between processes of one user.
func checkPeerUID(uid, self uint32, who, name string) error {
	if uid != self {
		return fmt.Errorf("%w: the %s of shared memory %q runs as uid %d, this process as uid %d", ErrAuth, who, name, uid, self)
	}
	return nil
}

func selfUID() uint32 { return uint32(os.Getuid()) }
