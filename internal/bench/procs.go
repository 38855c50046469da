package bench

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/rrefkit/rref/fifo"
)

// Two-process measurements run their second side in a child: this
// executable again, started with one of these variables set, which
// ServeChild recognises. A child lives while its standard input is open, so
// it dies with the parent.
const (
	floorEnv = "RREF_BENCH_FLOOR_PEER" // a shared file's path
	fifoEnv  = "RREF_BENCH_FIFO_PEER"  // "name" or "name,exclusive" (shm), "fabric,addr,provider"
)

// child is a running peer process.
type child struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
}

func startChild(env ...string) (*child, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe)
	// A race-enabled child would sleep a second on exit, waiting for late
	// reports; the floors start dozens of children per table.
	race := "GORACE=atexit_sleep_ms=0"
	if v := os.Getenv("GORACE"); v != "" {
		race += " " + v
	}
	cmd.Env = append(append(os.Environ(), env...), race)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return &child{cmd: cmd, stdin: stdin}, nil
}

// stop closes the child's standard input, which tells it to exit, and waits.
func (c *child) stop() error {
	c.stdin.Close()
	return c.cmd.Wait()
}

// whenStdinCloses runs fn once this process's standard input is closed: the
// parent is done, or dead.
func whenStdinCloses(fn func()) {
	go func() {
		io.Copy(io.Discard, os.Stdin)
		fn()
	}()
}

// floorLines heads the file a two-process floor shares: the counter both
// sides bump, and a control word (the child's readiness, the parent's
// stop), each on a line of its own. The ring floor's two rings of lines
// follow it.
type floorLines struct {
	_       [64]byte
	counter atomic.Uint64
	_       [56]byte
	control atomic.Uint32 // 1: the child polls; 2: the parent is done
	_       [60]byte
}

const (
	floorReady = 1
	floorStop  = 2
	// ringLines is the length of each ring of the ring floor: the default
	// fifo ring's cell count.
	ringLines = 4096
)

// floorFile is a mapped floor file.
type floorFile struct {
	*floorLines
	rings []byte // two rings of ringLines lines: parent to child, child to parent
}

// line returns the first word of line i of ring r (0: the parent writes it).
func (f floorFile) line(r, i int) *atomic.Uint64 {
	return (*atomic.Uint64)(unsafe.Pointer(&f.rings[(r*ringLines+i%ringLines)*64]))
}

func mapFloor(path string, create bool) (floorFile, func(), error) {
	flags := os.O_RDWR
	if create {
		flags |= os.O_CREATE | os.O_EXCL
	}
	f, err := os.OpenFile(path, flags, 0o600)
	if err != nil {
		return floorFile{}, nil, err
	}
	defer f.Close()
	head := int(unsafe.Sizeof(floorLines{}))
	size := head + 2*ringLines*64
	if create {
		if err := f.Truncate(int64(size)); err != nil {
			return floorFile{}, nil, err
		}
	}
	mem, err := unix.Mmap(int(f.Fd()), 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return floorFile{}, nil, err
	}
	return floorFile{(*floorLines)(unsafe.Pointer(&mem[0])), mem[head:]}, func() { unix.Munmap(mem) }, nil
}

var floorSeq atomic.Int64

// CacheLineFloor is the machine's floor for one-way latency between two
// processes: each hands a counter back to the other through one cache line
// of a shared mapping, for about d.
func CacheLineFloor(d time.Duration) (time.Duration, error) {
	ns, err := floorProcess("line", func(f floorFile) float64 {
		line := &f.counter
		rounds := 0
		start := time.Now()
		for time.Since(start) < d {
			for i := 0; i < 1024; i++ {
				v := line.Load()
				line.Store(v + 1)
				for line.Load() == v+1 {
				}
				rounds++
			}
		}
		return float64(time.Since(start)) / float64(2*rounds)
	})
	return time.Duration(ns), err
}

// RingFloor is the floor of any transport made of two one-way rings, as
// fifo is: each process writes the next line of a ring of its own (4096
// lines of 64 bytes, the default fifo ring) and the other polls that line,
// for about d. A message in a fresh line, written by one side only, costs
// more than a line both sides bounce: this is what fifo/shm's protocol
// work is measured against.
func RingFloor(d time.Duration) (time.Duration, error) {
	ns, err := floorProcess("rings", func(f floorFile) float64 {
		rounds := 0
		start := time.Now()
		for time.Since(start) < d {
			for i := 0; i < 1024; i++ {
				rounds++
				f.line(0, rounds).Store(uint64(rounds))
				for f.line(1, rounds).Load() != uint64(rounds) {
				}
			}
		}
		return float64(time.Since(start)) / float64(2*rounds)
	})
	return time.Duration(ns), err
}

// StreamFloor is the floor for a stream of one-line messages between two
// processes: the child writes the next line of a 4096-line ring as soon as
// its consumer's progress (published every 64 lines) allows, and this
// process polls each line in turn, for about d. It returns lines per second.
func StreamFloor(d time.Duration) (float64, error) {
	return floorProcess("stream", func(f floorFile) float64 {
		got := 0
		start := time.Now()
		for time.Since(start) < d {
			for i := 0; i < 1024; i++ {
				got++
				for f.line(1, got).Load() != uint64(got) {
				}
				if got%64 == 0 {
					f.counter.Store(uint64(got))
				}
			}
		}
		return float64(got) / time.Since(start).Seconds()
	})
}

// floorProcess runs measure on this process's side of a floor whose other
// side runs in a child process, in mode.
func floorProcess(mode string, measure func(floorFile) float64) (float64, error) {
	path := fmt.Sprintf("%s/rref-bench-floor-%d-%d", fifo.SHMDir, os.Getpid(), floorSeq.Add(1))
	f, unmap, err := mapFloor(path, true)
	if err != nil {
		return 0, err
	}
	defer os.Remove(path)
	defer unmap()
	peer, err := startChild(floorEnv + "=" + path + "," + mode)
	if err != nil {
		return 0, err
	}
	defer peer.stop()
	defer f.control.Store(floorStop)
	deadline := time.Now().Add(10 * time.Second)
	for f.control.Load() != floorReady {
		if time.Now().After(deadline) {
			return 0, errors.New("bench: the floor's peer process did not start")
		}
		time.Sleep(100 * time.Microsecond)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	return measure(f), nil
}

// serveFloor is the child's side of a floor: it answers every odd count
// (line), every line of the parent's ring (rings), or writes lines as fast
// as the parent takes them (stream), until the parent stops it or goes away.
func serveFloor(spec string) {
	path, mode, _ := strings.Cut(spec, ",")
	f, unmap, err := mapFloor(path, false)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench floor peer:", err)
		os.Exit(1)
	}
	defer unmap()
	var orphaned atomic.Bool
	whenStdinCloses(func() { orphaned.Store(true) })
	runtime.LockOSThread()
	f.control.Store(floorReady)
	line := &f.counter
	next := 1
	for {
		for i := 0; i < 1024; i++ {
			switch mode {
			case "rings":
				if f.line(0, next).Load() == uint64(next) {
					f.line(1, next).Store(uint64(next))
					next++
				}
			case "stream":
				// Up to a ring less 64 lines ahead of the progress the
				// parent published, which lags it by up to 64.
				if uint64(next)-line.Load() < ringLines-64 {
					f.line(1, next).Store(uint64(next))
					next++
				}
			default:
				if v := line.Load(); v&1 == 1 {
					line.Store(v + 1)
				}
			}
		}
		if f.control.Load() == floorStop || orphaned.Load() {
			return
		}
	}
}

// Commands a parent sends a fifo peer process, in the first byte of a message.
const (
	cmdEcho   = 'E' // echo every message until an empty one
	cmdStream = 'S' // send messages of a size for a duration, then an empty one
)

// procEnd is our end of a fifo/shm connection to a peer process.
type procEnd struct {
	*fifo.Conn
	peer *child
}

// procPair starts a peer process connected over a fresh shared-memory file.
func procPair(cfg fifo.Config) func() (*procEnd, error) {
	return func() (*procEnd, error) {
		name := fmt.Sprintf("rref-bench-%d-%d", os.Getpid(), shmSeq.Add(1))
		spec := name
		if cfg.Exclusive {
			spec += ",exclusive"
		}
		peer, err := startChild(fifoEnv + "=" + spec)
		if err != nil {
			return nil, err
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c, err := fifo.ListenSHM(ctx, name, benchSecret, cfg)
		if err != nil {
			peer.stop()
			return nil, err
		}
		return &procEnd{Conn: c, peer: peer}, nil
	}
}

// procFabric starts a peer process that dials this one over libfabric
// (provider prov, "" for fifo's choice), bootstrapped over a tcp listener
// of this process, as the fabric provider is used between processes (and
// as fi_pingpong, its yardstick, runs).
func procFabric(cfg fifo.Config, prov string) func() (*procEnd, error) {
	return func() (*procEnd, error) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer ln.Close()
		peer, err := startChild(fifoEnv + "=fabric," + ln.Addr().String() + "," + prov)
		if err != nil {
			return nil, err
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c, err := fifo.AcceptFabric(ctx, ln, benchSecret, cfg, fifo.WithProvider(prov))
		if err != nil {
			peer.stop()
			return nil, err
		}
		return &procEnd{Conn: c, peer: peer}, nil
	}
}

func (p *procEnd) Close() error {
	err := p.Conn.Close()
	if werr := p.peer.stop(); err == nil && werr != nil {
		err = fmt.Errorf("bench: peer process: %w", werr)
	}
	return err
}

// benchConfig is the geometry every fifo row uses: the default ring (4096
// cells, 256 KiB, which fits in L2) and messages up to the largest measured.
func benchConfig(exclusive bool) fifo.Config {
	return fifo.Config{MaxMessage: 4 << 20, Exclusive: exclusive}
}

// serveFIFO is a fifo peer process: it dials the parent and runs its
// commands until the connection or its standard input closes.
func serveFIFO(spec string) {
	name, mode, _ := strings.Cut(spec, ",")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	var c *fifo.Conn
	var err error
	if name == "fabric" {
		addr, prov, _ := strings.Cut(mode, ",")
		c, err = fifo.DialFabric(ctx, addr, benchSecret, benchConfig(false), fifo.WithProvider(prov))
	} else {
		c, err = fifo.DialSHM(ctx, name, benchSecret, benchConfig(mode == "exclusive"))
	}
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench fifo peer:", err)
		os.Exit(1)
	}
	whenStdinCloses(func() { c.Close() })
	defer c.Close()
	ctx = context.Background()
	var buf []byte
	for {
		if buf, err = c.Recv(ctx, buf); err != nil {
			return
		}
		switch {
		case len(buf) == 1 && buf[0] == cmdEcho:
			for {
				if buf, err = c.Recv(ctx, buf); err != nil {
					return
				}
				if err = c.Send(ctx, buf); err != nil || len(buf) == 0 {
					break
				}
			}
		case len(buf) == 14 && buf[0] == cmdStream:
			size := int(binary.LittleEndian.Uint32(buf[1:]))
			d := time.Duration(binary.LittleEndian.Uint64(buf[5:]))
			err = sendFor(ctx, c, streamSender(c, size, buf[13] != 0), d)
		default:
			fmt.Fprintf(os.Stderr, "bench fifo peer: unknown command %q\n", buf)
			return
		}
		if err != nil {
			return
		}
	}
}

// sendFor sends messages with send for about d, then an empty message.
func sendFor(ctx context.Context, c end, send func(context.Context) error, d time.Duration) error {
	start := time.Now()
	for n := 1; ; n++ {
		if err := send(ctx); err != nil {
			return err
		}
		if n%64 == 0 && time.Since(start) > d {
			return c.Send(ctx, nil)
		}
	}
}

// streamCommand: cmdStream | size u32 | d u64 | in place u8.
func streamCommand(size int, d time.Duration, inPlace bool) []byte {
	b := []byte{cmdStream}
	b = binary.LittleEndian.AppendUint32(b, uint32(size))
	b = binary.LittleEndian.AppendUint64(b, uint64(d))
	if inPlace {
		return append(b, 1)
	}
	return append(b, 0)
}
