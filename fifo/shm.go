package fifo

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// offAttached, in ring 1's handshake line, is set by the end that attaches.
const offAttached = offToken + tokenSize

// SHMDir is where shared-memory connections are created.
var SHMDir = "/dev/shm"

func tokenOf(secret []byte) []byte {
	sum := sha256.Sum256(secret)
	return sum[:]
}

func mapFile(f *os.File, size int) ([]byte, func() error, error) {
	mem, err := unix.Mmap(int(f.Fd()), 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, nil, fmt.Errorf("fifo: mmap: %w", err)
	}
	return mem, func() error { return unix.Munmap(mem) }, nil
}

// ListenSHM creates the shared file name under SHMDir (mode 0600, refusing an
// existing one), waits for one peer to attach with DialSHM and the same
// secret, and returns this end. The file's name is removed once the peer has
// attached: the mapping lives on, and no stray process can attach later.
func ListenSHM(ctx context.Context, name string, secret []byte, cfg Config) (*Conn, error) {
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	path := SHMDir + "/" + name
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, fmt.Errorf("fifo: create %s: %w", path, err)
	}
	defer f.Close()
	lay := layoutFor(c)
	if err := f.Truncate(int64(lay.total)); err != nil {
		os.Remove(path)
		return nil, fmt.Errorf("fifo: size %s: %w", path, err)
	}
	mem, unmap, err := mapFile(f, lay.total)
	if err != nil {
		os.Remove(path)
		return nil, err
	}
	tx, rx, txb, rxb, err := sides(mem, c, 0)
	if err != nil {
		unmap()
		os.Remove(path)
		return nil, err
	}
	token := tokenOf(secret)
	rx.writeInit(token)
	// Ring 0's line is written last: the dialer waits for its magic.
	tx.writeInit(token)
	for atomic.LoadUint32(rx.u32(offAttached)) == 0 {
		if err := ctx.Err(); err != nil {
			unmap()
			os.Remove(path)
			return nil, fmt.Errorf("fifo: no peer attached to %s: %w", path, err)
		}
		time.Sleep(200 * time.Microsecond)
	}
	os.Remove(path)
	return newConn(newMemLink(c, tx, rx, txb, rxb, true, unmap), c), nil
}

// DialSHM attaches to a connection created by ListenSHM. The geometry in cfg
// and the secret must match the creator's, or the handshake is refused.
func DialSHM(ctx context.Context, name string, secret []byte, cfg Config) (*Conn, error) {
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	path := SHMDir + "/" + name
	lay := layoutFor(c)
	var f *os.File
	for {
		f, err = os.OpenFile(path, os.O_RDWR, 0)
		if err == nil {
			if st, serr := f.Stat(); serr == nil && st.Size() == int64(lay.total) {
				break
			} else if serr == nil && st.Size() != 0 && st.Size() != int64(lay.total) {
				f.Close()
				return nil, fmt.Errorf("%w: %s is %d bytes, want %d (geometry differs)", ErrAuth, path, st.Size(), lay.total)
			}
			f.Close()
		} else if !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("fifo: open %s: %w", path, err)
		}
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("fifo: %s did not appear: %w", path, err)
		}
		time.Sleep(200 * time.Microsecond)
	}
	defer f.Close()
	mem, unmap, err := mapFile(f, lay.total)
	if err != nil {
		return nil, err
	}
	tx, rx, txb, rxb, err := sides(mem, c, 1)
	if err != nil {
		unmap()
		return nil, err
	}
	token := tokenOf(secret)
	for atomic.LoadUint64(rx.u64(offMagic)) == 0 {
		if err := ctx.Err(); err != nil {
			unmap()
			return nil, fmt.Errorf("fifo: %s was never initialised: %w", path, err)
		}
		time.Sleep(200 * time.Microsecond)
	}
	if err := rx.checkInit(token); err != nil {
		unmap()
		return nil, err
	}
	if err := tx.checkInit(token); err != nil {
		unmap()
		return nil, err
	}
	atomic.StoreUint32(tx.u32(offAttached), 1)
	return newConn(newMemLink(c, tx, rx, txb, rxb, true, unmap), c), nil
}
