package fifo

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"pgregory.net/rapid"
)

func TestMain(m *testing.M) {
	if peer := os.Getenv("RREF_FIFO_PEER"); peer != "" {
		os.Exit(runPeer(peer))
	}
	if os.Getenv("RREF_FABRIC_ONLY") != "" {
		// The tests written for every provider run over the fabric alone
		// (-tags rreffabric): a run for one more libfabric provider need
		// not repeat mem, shm, tcp and tls.
		maps.DeleteFunc(providers, func(name string, _ pairFunc) bool { return name != "fabric" })
	}
	goleak.VerifyTestMain(m)
}

var secret = []byte("test secret")

type pairFunc func(t testing.TB, cfg Config) (*Conn, *Conn)

func memPair(t testing.TB, cfg Config) (*Conn, *Conn) {
	a, b, err := Pipe(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return a, b
}

var shmCount int

func shmPair(t testing.TB, cfg Config) (*Conn, *Conn) {
	shmCount++
	name := fmt.Sprintf("rref-test-%d-%d", os.Getpid(), shmCount)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var a *Conn
	var err error
	done := make(chan struct{})
	go func() {
		defer close(done)
		a, err = ListenSHM(ctx, name, secret, cfg)
	}()
	b, derr := DialSHM(ctx, name, secret, cfg)
	<-done
	if err != nil || derr != nil {
		t.Fatal(err, derr)
	}
	return a, b
}

func tcpPair(t testing.TB, cfg Config) (*Conn, *Conn) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var a *Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		a, err = AcceptTCP(ctx, ln, secret, cfg)
	}()
	b, derr := DialTCP(ctx, ln.Addr().String(), secret, cfg)
	<-done
	if err != nil || derr != nil {
		t.Fatal(err, derr)
	}
	return a, b
}

// tcpResumablePair connects through a TCPListener, which keeps sessions:
// its connections keep what a resume needs (the tx image, rendezvous
// copies), on every path the other tests take.
func tcpResumablePair(t testing.TB, cfg Config) (*Conn, *Conn) {
	l := listen(t, cfg)
	t.Cleanup(func() { l.Close() })
	return acceptDial(t, l, l.Addr().String(), cfg)
}

// acceptDial dials addr, which leads to l, while l accepts, and returns
// the accepted end and the dialed one.
func acceptDial(t testing.TB, l *TCPListener, addr string, cfg Config, opts ...TCPOption) (accepted, dialed *Conn) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var err error
	done := make(chan struct{})
	go func() {
		defer close(done)
		accepted, err = l.Accept(ctx)
	}()
	dialed, derr := DialTCP(ctx, addr, secret, cfg, opts...)
	<-done
	if err != nil || derr != nil {
		t.Fatal(err, derr)
	}
	return accepted, dialed
}

var providers = map[string]pairFunc{"mem": memPair, "shm": shmPair, "tcp": tcpPair, "tcp-resumable": tcpResumablePair}

// builtinPairs are the built-in providers by name, for tests of one of
// them in particular: providers may hold the fabric alone (RREF_FABRIC_ONLY).
var builtinPairs = map[string]pairFunc{"mem": memPair, "shm": shmPair, "tcp": tcpPair}

// modes is every provider, and each again with Config.Exclusive set on both
// ends, for tests where one goroutine sends and one receives per end.
func modes() map[string]pairFunc {
	m := map[string]pairFunc{}
	for name, pair := range providers {
		m[name] = pair
		m[name+"/exclusive"] = func(t testing.TB, cfg Config) (*Conn, *Conn) {
			cfg.Exclusive = true
			return pair(t, cfg)
		}
	}
	return m
}

func pattern(i, n int) []byte {
	b := make([]byte, n)
	for j := range b {
		b[j] = byte(i*31 + j*7)
	}
	return b
}

// TestRandomTraffic sends random sizes across wrap-around, credit exhaustion
// and the rendezvous channel, checking every byte and the order.
func TestRandomTraffic(t *testing.T) {
	for name, pair := range modes() {
		t.Run(name, func(t *testing.T) {
			rapid.Check(t, func(rt *rapid.T) {
				cells := uint64(1) << rapid.IntRange(4, 9).Draw(rt, "log2cells")
				cfg := Config{Cells: cells, MaxMessage: 1 << 16, BulkSlots: rapid.IntRange(1, 3).Draw(rt, "slots")}
				sizes := rapid.SliceOfN(rapid.IntRange(0, 1<<16), 1, 60).Draw(rt, "sizes")
				a, b := pair(t, cfg)
				defer a.Close()
				defer b.Close()
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				errc := make(chan error, 1)
				go func() {
					for i, n := range sizes {
						if err := a.Send(ctx, pattern(i, n)); err != nil {
							errc <- err
							return
						}
					}
					errc <- nil
				}()
				var buf []byte
				var err error
				for i, n := range sizes {
					if buf, err = b.Recv(ctx, buf); err != nil {
						rt.Fatalf("recv %d: %v", i, err)
					}
					if !bytes.Equal(buf, pattern(i, n)) {
						rt.Fatalf("message %d: got %d bytes, want %d (or content differs)", i, len(buf), n)
					}
				}
				if err := <-errc; err != nil {
					rt.Fatal(err)
				}
			})
		})
	}
}

// TestBothFullNoDeadlock floods both directions at once: credit returns never
// need credits, so neither side can wedge the other.
func TestBothFullNoDeadlock(t *testing.T) {
	for name, pair := range modes() {
		t.Run(name, func(t *testing.T) {
			a, b := pair(t, Config{Cells: 16})
			defer a.Close()
			defer b.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			const n = 5000
			var wg sync.WaitGroup
			errs := make(chan error, 4)
			for _, c := range []*Conn{a, b} {
				wg.Add(2)
				go func(c *Conn) {
					defer wg.Done()
					for i := 0; i < n; i++ {
						if err := c.Send(ctx, pattern(i, 100)); err != nil {
							errs <- err
							return
						}
					}
				}(c)
				go func(c *Conn) {
					defer wg.Done()
					var buf []byte
					var err error
					for i := 0; i < n; i++ {
						if buf, err = c.Recv(ctx, buf); err != nil {
							errs <- err
							return
						}
						if !bytes.Equal(buf, pattern(i, 100)) {
							errs <- fmt.Errorf("message %d corrupt", i)
							return
						}
					}
				}(c)
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			if a.Stats().CreditStalls == 0 && b.Stats().CreditStalls == 0 {
				t.Log("no credit stall happened (the receivers kept up)")
			}
		})
	}
}

func TestCloseFailsPendingCalls(t *testing.T) {
	for name, pair := range modes() {
		t.Run(name, func(t *testing.T) {
			a, b := pair(t, Config{Cells: 16})
			defer b.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			errc := make(chan error, 1)
			go func() {
				_, err := b.Recv(ctx, nil)
				errc <- err
			}()
			time.Sleep(20 * time.Millisecond)
			a.Close()
			if err := <-errc; !errors.Is(err, ErrClosed) {
				t.Fatalf("pending Recv after the peer closed: %v", err)
			}
			if err := a.Send(ctx, []byte("x")); !errors.Is(err, ErrClosed) {
				t.Fatalf("Send after Close: %v", err)
			}
		})
	}
}

func TestContextBoundsBlockingCalls(t *testing.T) {
	for name, pair := range modes() {
		t.Run(name, func(t *testing.T) {
			a, b := pair(t, Config{Cells: 16})
			defer a.Close()
			defer b.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
			defer cancel()
			if _, err := b.Recv(ctx, nil); !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("Recv with nothing to read: %v", err)
			}
			// Fill the ring: the next Send waits for credits, then gives up with ctx.
			ctx2, cancel2 := context.WithTimeout(context.Background(), 50*time.Millisecond)
			defer cancel2()
			var err error
			for i := 0; i < 100 && err == nil; i++ {
				err = a.Send(ctx2, pattern(i, 200))
			}
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("Send into a full ring: %v", err)
			}
		})
	}
}

func TestConfigAndLimits(t *testing.T) {
	for _, cfg := range []Config{{Cells: 3}, {Cells: 8}, {Cells: 64, EagerLimit: 1 << 20}, {EagerLimit: Immediate - 1}, {MaxMessage: 1}, {CreditThreshold: 1 << 30}} {
		if _, _, err := Pipe(cfg); !errors.Is(err, ErrConfig) {
			t.Errorf("%+v: %v", cfg, err)
		}
	}
	a, b := memPair(t, Config{Cells: 64, MaxMessage: 4096})
	defer a.Close()
	defer b.Close()
	if err := a.Send(context.Background(), make([]byte, 4097)); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("oversize: %v", err)
	}
}

func TestTCPHandshakeRefusesStrangers(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		// AcceptTCP drops strays until its context ends, then names the last.
		actx, acancel := context.WithTimeout(ctx, 300*time.Millisecond)
		defer acancel()
		_, err := AcceptTCP(actx, ln, secret, Config{})
		errc <- err
	}()
	if _, err := DialTCP(ctx, ln.Addr().String(), []byte("wrong"), Config{}); !errors.Is(err, ErrAuth) {
		t.Fatalf("dial with a wrong secret: %v", err)
	}
	if err := <-errc; !errors.Is(err, ErrAuth) {
		t.Fatalf("accept of a wrong secret: %v", err)
	}
}

func TestSHMHandshakeRefusesStrangers(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	name := fmt.Sprintf("rref-test-auth-%d", os.Getpid())
	go ListenSHM(ctx, name, secret, Config{})
	if _, err := DialSHM(ctx, name, []byte("wrong"), Config{}); !errors.Is(err, ErrAuth) {
		t.Fatalf("dial with a wrong secret: %v", err)
	}
	<-ctx.Done()
	time.Sleep(20 * time.Millisecond) // let the listener give up and remove its file
	if _, err := os.Stat(SHMDir + "/" + name); !os.IsNotExist(err) {
		t.Fatalf("listener left %s behind: %v", name, err)
	}
}

// runPeer is the other process of TestSHMTwoProcesses: an echo server.
func runPeer(spec string) int {
	name, mode, _ := strings.Cut(spec, ",")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := DialSHM(ctx, name, secret, Config{Cells: 256})
	if err != nil {
		fmt.Fprintln(os.Stderr, "peer:", err)
		return 1
	}
	if mode == "die" {
		os.Exit(0) // vanish without closing: the other end must notice
	}
	defer c.Close()
	var buf []byte
	for {
		if buf, err = c.Recv(ctx, buf); err != nil {
			return 0
		}
		if err := c.Send(ctx, buf); err != nil {
			return 0
		}
	}
}

func startPeer(t *testing.T, name, mode string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "RREF_FIFO_PEER="+name+","+mode)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd
}

// TestSHMTwoProcesses echoes messages of every size through a second process.
func TestSHMTwoProcesses(t *testing.T) {
	name := fmt.Sprintf("rref-test-2p-%d", os.Getpid())
	cmd := startPeer(t, name, "echo")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := ListenSHM(ctx, name, secret, Config{Cells: 256})
	if err != nil {
		t.Fatal(err)
	}
	echoThroughPeer(t, c, cmd, []int{0, 1, 48, 49, 1000, 3000, 5000, 100_000, 1 << 20, 7})
}

// echoThroughPeer sends messages of each size to a peer process that
// echoes them, checks each echo, closes, and waits for the peer to exit.
func echoThroughPeer(t *testing.T, c *Conn, cmd *exec.Cmd, sizes []int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var buf []byte
	var err error
	for i, n := range sizes {
		want := pattern(i, n)
		if err := c.Send(ctx, want); err != nil {
			t.Fatal(err)
		}
		if buf, err = c.Recv(ctx, buf); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(buf, want) {
			t.Fatalf("echo of %d bytes differs", n)
		}
	}
	c.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("peer: %v", err)
	}
}

// TestSHMPeerDeath: a peer that vanishes is detected by its silent heartbeat.
func TestSHMPeerDeath(t *testing.T) {
	name := fmt.Sprintf("rref-test-death-%d", os.Getpid())
	cmd := startPeer(t, name, "die")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := ListenSHM(ctx, name, secret, Config{Cells: 256, Heartbeat: 10 * time.Millisecond, DeadAfter: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cmd.Wait()
	start := time.Now()
	if _, err := c.Recv(ctx, nil); !errors.Is(err, ErrPeerDead) {
		t.Fatalf("Recv from a dead peer: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("death noticed after %v", d)
	}
}

func TestTCPPeerDeath(t *testing.T) {
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	defer ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	go func() {
		nc, err := net.Dial("tcp", ln.Addr().String())
		if err == nil {
			dialHandshake(ctx, nc, ln.Addr().String(), secret, mustDefaults(Config{}), tcpOptionsOf(nil), sessionID{})
			nc.Close() // gone, with no close frame
		}
	}()
	c, err := AcceptTCP(ctx, ln, secret, Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Recv(ctx, nil); !errors.Is(err, ErrPeerDead) {
		t.Fatalf("Recv from a vanished peer: %v", err)
	}
}

func mustDefaults(c Config) Config {
	d, err := c.withDefaults()
	if err != nil {
		panic(err)
	}
	return d
}

// TestRecvFuncHandsPayloadInPlace covers eager and rendezvous messages.
func TestRecvFuncHandsPayloadInPlace(t *testing.T) {
	for name, pair := range providers {
		t.Run(name, func(t *testing.T) {
			a, b := pair(t, Config{Cells: 64, MaxMessage: 1 << 16})
			defer a.Close()
			defer b.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			sizes := []int{0, 56, 57, 900, 5000, 60000, 3}
			go func() {
				for i, n := range sizes {
					a.Send(ctx, pattern(i, n))
				}
			}()
			for i, n := range sizes {
				var got []byte
				if err := b.RecvFunc(ctx, func(p []byte) error { got = append(got, p...); return nil }); err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, pattern(i, n)) {
					t.Fatalf("message %d of %d bytes differs", i, n)
				}
			}
			boom := errors.New("boom")
			go a.Send(ctx, []byte("x"))
			if err := b.RecvFunc(ctx, func([]byte) error { return boom }); err != boom {
				t.Fatalf("fn's error: %v", err)
			}
		})
	}
}

// TestSHMHandshakeChecksGeometry: a region whose cell size or count differs
// from the attaching end's is refused.
func TestSHMHandshakeChecksGeometry(t *testing.T) {
	mem := alignedBytes(ringSize(16))
	r, err := newRing(mem, 16)
	if err != nil {
		t.Fatal(err)
	}
	tok := regionToken(secret, &transcript{})
	r.writeInit(tok)
	if err := r.checkInit(tok); err != nil {
		t.Fatalf("matching region refused: %v", err)
	}
	binary.LittleEndian.PutUint32(mem[offCellSize:], 128)
	if err := r.checkInit(tok); !errors.Is(err, ErrAuth) || !strings.Contains(err.Error(), "128-byte cells") {
		t.Fatalf("other cell size: %v", err)
	}
	binary.LittleEndian.PutUint32(mem[offCellSize:], Cell)
	other, _ := newRing(mem, 8)
	if err := other.checkInit(tok); !errors.Is(err, ErrAuth) {
		t.Fatalf("other cell count: %v", err)
	}
}

// TestSocketSpinHonoursDeadlinesAndClose keeps a tcp reader spinning on its
// socket far longer than the test: a message still arrives, a context's
// deadline still ends a Recv, and Close still ends one, while it spins.
func TestSocketSpinHonoursDeadlinesAndClose(t *testing.T) {
	for _, spin := range []time.Duration{time.Hour, -1} {
		t.Run(fmt.Sprint(spin), func(t *testing.T) {
			a, b := tcpPair(t, Config{Cells: 16, SocketSpin: spin})
			defer a.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			got := make(chan error, 1)
			go func() {
				p, err := b.Recv(ctx, nil)
				if err == nil && string(p) != "hello" {
					err = fmt.Errorf("got %q", p)
				}
				got <- err
			}()
			time.Sleep(20 * time.Millisecond)
			if err := a.Send(ctx, []byte("hello")); err != nil {
				t.Fatal(err)
			}
			if err := <-got; err != nil {
				t.Fatal(err)
			}
			short, cancelShort := context.WithTimeout(ctx, 50*time.Millisecond)
			defer cancelShort()
			start := time.Now()
			if _, err := b.Recv(short, nil); !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("Recv past its deadline: %v", err)
			}
			if waited := time.Since(start); waited > 5*time.Second {
				t.Fatalf("Recv returned %v after its 50 ms deadline", waited)
			}
			go func() {
				_, err := b.Recv(ctx, nil)
				got <- err
			}()
			time.Sleep(20 * time.Millisecond)
			b.Close()
			select {
			case err := <-got:
				if !errors.Is(err, ErrClosed) {
					t.Fatalf("Recv on a closed end: %v", err)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("Close did not end a spinning Recv")
			}
		})
	}
}
