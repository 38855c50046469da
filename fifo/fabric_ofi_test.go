//go:build rreffabric && cgo && linux

package fifo

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// fabricProvider is the libfabric provider the tests use:
// RREF_FABRIC_PROVIDER, or the default choice. RREF_FABRIC_ONLY set runs
// the tests written for every provider over the fabric alone.
var fabricProvider = os.Getenv("RREF_FABRIC_PROVIDER")

func init() {
	providers["fabric"] = fabricPair
	builtin := slotMemory
	slotMemory = func(l link) []byte {
		if fl, ok := l.(*fabricLink); ok {
			return fl.bulk
		}
		return builtin(l)
	}
}

func fabricPair(t testing.TB, cfg Config) (*Conn, *Conn) {
	t.Helper()
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
		a, err = AcceptFabric(ctx, ln, secret, cfg, WithProvider(fabricProvider))
	}()
	b, derr := DialFabric(ctx, ln.Addr().String(), secret, cfg, WithProvider(fabricProvider))
	<-done
	if err != nil || derr != nil {
		if a != nil {
			a.Close()
		}
		if b != nil {
			b.Close()
		}
		t.Fatal(err, derr)
	}
	return a, b
}

func TestFabricProviders(t *testing.T) {
	p, err := FabricProviders()
	t.Log(p, err)
	if err != nil || len(p) == 0 {
		t.Fatal(p, err)
	}
}

func TestFabricSmoke(t *testing.T) {
	a, b := fabricPair(t, Config{Cells: 64, MaxMessage: 1 << 20})
	defer a.Close()
	defer b.Close()
	ctx := context.Background()
	for i, n := range []int{0, 1, 56, 57, 1000, 4000, 100000, 1 << 20} {
		if err := a.Send(ctx, pattern(i, n)); err != nil {
			t.Fatal(err)
		}
		got, err := b.Recv(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(pattern(i, n)) {
			t.Fatalf("message %d of %d bytes differs", i, n)
		}
	}
}

// shiftTx and shiftRx move an idle link's counters (wrap_test.go).
func (l *fabricLink) shiftTx(pos uint64) { l.txCred.Store(pos) }
func (l *fabricLink) shiftRx(pos uint64, seq uint32) {
	l.landing.nextPos, l.landing.nextSeq = pos, seq
}

// A second process for the tests below: RREF_FABRIC_PEER=addr,mode dials
// addr and echoes (mode echo) or exits without closing (mode die).
func init() {
	spec := os.Getenv("RREF_FABRIC_PEER")
	if spec == "" {
		return
	}
	addr, mode, _ := strings.Cut(spec, ",")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// RREF_FABRIC_NODE: the address to bind the endpoint to, for a peer in
	// another network namespace (TestFabricAcrossNetworkNamespaces).
	c, err := DialFabric(ctx, addr, secret, Config{Cells: 256}, WithProvider(fabricProvider), WithFabricNode(os.Getenv("RREF_FABRIC_NODE")))
	if err != nil {
		fmt.Fprintln(os.Stderr, "fabric peer:", err)
		os.Exit(1)
	}
	if mode == "die" {
		os.Exit(0) // vanish without closing: the other end must notice
	}
	var buf []byte
	for {
		if buf, err = c.Recv(ctx, buf); err != nil {
			break
		}
		if err = c.Send(ctx, buf); err != nil {
			break
		}
	}
	c.Close()
	os.Exit(0)
}

func startFabricPeer(t *testing.T, addr, mode string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "RREF_FABRIC_PEER="+addr+","+mode)
	cmd.Stderr = os.Stderr
	// The peer dies with this process: a test binary killed by its timeout
	// left echo peers spinning for minutes on a loaded host.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd
}

func acceptFabricPeer(t *testing.T, mode string, cfg Config) (*Conn, *exec.Cmd) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cmd := startFabricPeer(t, ln.Addr().String(), mode)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := AcceptFabric(ctx, ln, secret, cfg, WithProvider(fabricProvider))
	if err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatal(err)
	}
	return c, cmd
}

// TestFabricTwoProcesses echoes messages of every size, rendezvous
// included, through a second process.
func TestFabricTwoProcesses(t *testing.T) {
	c, cmd := acceptFabricPeer(t, "echo", Config{Cells: 256})
	echoThroughPeer(t, c, cmd, []int{0, 1, 56, 57, 1000, 3000, 5000, 100_000, 1 << 20, 4 << 20, 7})
}

// TestFabricPeerDeath: a peer process that exits without closing is dead at
// once (its tcp connection ends with no close), for a waiting Recv and for
// a Send.
func TestFabricPeerDeath(t *testing.T) {
	c, cmd := acceptFabricPeer(t, "die", Config{Cells: 256})
	defer c.Close()
	cmd.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	if _, err := c.Recv(ctx, nil); !errors.Is(err, ErrPeerDead) {
		t.Fatalf("Recv from a dead peer: %v", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("death noticed after %v", d)
	}
	if err := c.Send(ctx, []byte("x")); !errors.Is(err, ErrPeerDead) {
		t.Fatalf("Send to a dead peer: %v", err)
	}
}

// TestFabricSilentPeerIsDead: a peer whose signals stop while its tcp
// connection stays open (a stopped process, or a host gone) is dead after
// DeadAfter.
func TestFabricSilentPeerIsDead(t *testing.T) {
	c, cmd := acceptFabricPeer(t, "echo", Config{Cells: 256, Heartbeat: 5 * time.Millisecond, DeadAfter: 300 * time.Millisecond})
	defer c.Close()
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	ctx0, cancel0 := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel0()
	if err := c.Send(ctx0, []byte("ping")); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Recv(ctx0, nil); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.Recv(ctx, nil); !errors.Is(err, ErrPeerDead) {
		t.Fatalf("Recv from a stopped peer: %v", err)
	}
	if d := time.Since(start); d < 250*time.Millisecond || d > 3*time.Second {
		t.Fatalf("a silent peer was found dead after %v, with DeadAfter 300ms", d)
	}
}

// TestFabricRefusesStrangers: a wrong secret is refused on both ends, and
// the acceptor goes on to take the right one.
func TestFabricRefusesStrangers(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	type res struct {
		c   *Conn
		err error
	}
	acc := make(chan res, 1)
	go func() {
		c, err := AcceptFabric(ctx, ln, secret, Config{Cells: 64}, WithProvider(fabricProvider))
		acc <- res{c, err}
	}()
	if _, err := DialFabric(ctx, ln.Addr().String(), []byte("wrong"), Config{Cells: 64}, WithProvider(fabricProvider)); !errors.Is(err, ErrAuth) {
		t.Fatalf("dial with a wrong secret: %v", err)
	}
	if _, err := DialFabric(ctx, ln.Addr().String(), secret, Config{Cells: 128}, WithProvider(fabricProvider)); !errors.Is(err, ErrAuth) {
		t.Fatalf("dial with another geometry: %v", err)
	}
	b, err := DialFabric(ctx, ln.Addr().String(), secret, Config{Cells: 64}, WithProvider(fabricProvider))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	r := <-acc
	if r.err != nil {
		t.Fatal(r.err)
	}
	defer r.c.Close()
	echoCheck(t, r.c, b)
}

// TestFabricProviderMismatch: ends on different providers are refused,
// naming both.
func TestFabricProviderMismatch(t *testing.T) {
	all, _ := FabricProviders()
	mine := fabricProvider
	if mine == "" {
		mine = defaultProvider()
	}
	other := ""
	for _, p := range all {
		if p != mine && !strings.Contains(p, "udp") && !slices.Contains(fabricAvoid, p) {
			other = p
			break
		}
	}
	if other == "" {
		t.Skip("one provider only")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	go AcceptFabric(ctx, ln, secret, Config{Cells: 64}, WithProvider(other))
	_, err = DialFabric(ctx, ln.Addr().String(), secret, Config{Cells: 64}, WithProvider(mine))
	if !errors.Is(err, ErrAuth) || !strings.Contains(err.Error(), other) || !strings.Contains(err.Error(), mine) {
		t.Fatalf("ends on %s and %s: %v", mine, other, err)
	}
	<-ctx.Done()
}

// TestFabricHostilePeer: signals a member cannot mean, sent over the real
// fabric, fail the receiving end with ErrCorrupt, and nothing else of that
// peer is applied after.
func TestFabricHostilePeer(t *testing.T) {
	cases := []struct {
		name string
		data uint64
	}{
		{"an unknown signal", signal(7, 0)},
		{"remote CQ data above 32 bits", 1<<40 | signal(sigBeat, 0)},
		{"a finish for a slot not out", signal(sigFinish, 0)},
		{"a finish for a slot that does not exist", signal(sigFinish, 99)},
		{"a put outside the ring", signal(sigPut, 1<<20)},
		{"a put of a cell never written", signal(sigPut, 0)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a, b := fabricPair(t, Config{Cells: 64})
			defer a.Close()
			defer b.Close()
			lb := b.l.(*fabricLink)
			if err := lb.write(lb.sigSrc, lb.peer.ring, lb.peer.ringKey, tc.data, false); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if _, err := a.Recv(ctx, nil); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Recv after %s: %v", tc.name, err)
			}
		})
	}
}

// TestFabricCloseAfterABurst: every message sent before Close reaches the
// peer before the close does, rendezvous included.
func TestFabricCloseAfterABurst(t *testing.T) {
	for round := 0; round < 5; round++ {
		a, b := fabricPair(t, Config{Cells: 1024, MaxMessage: 1 << 18})
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		const n = 200
		go func() {
			for i := 0; i < n; i++ {
				if a.Send(ctx, pattern(i, (i*977)%(100<<10))) != nil {
					return
				}
			}
			a.Close()
		}()
		var buf []byte
		var err error
		for i := 0; i < n; i++ {
			if buf, err = b.Recv(ctx, buf); err != nil {
				t.Fatalf("round %d: message %d of %d: %v", round, i, n, err)
			}
			if !bytes.Equal(buf, pattern(i, (i*977)%(100<<10))) {
				t.Fatalf("round %d: message %d differs", round, i)
			}
		}
		if _, err := b.Recv(ctx, buf); !errors.Is(err, ErrClosed) {
			t.Fatalf("round %d: after the last message: %v", round, err)
		}
		b.Close()
		cancel()
	}
}

// BenchmarkFabricPingPong reports one-way latency over the fabric, beside
// tcp's in BenchmarkPingPong.
func BenchmarkFabricPingPong(b *testing.B) {
	for _, size := range []int{8, 56, 4096, 65536, 1 << 20} {
		b.Run(fmt.Sprint(size), func(b *testing.B) {
			a, e := fabricPair(b, Config{Cells: 1 << 12})
			pingPong(b, a, e, size)
		})
	}
}

// TestFabricWritesIntoAnEndedConnection: an end that keeps writing while
// its peer closes sees its writes fail on the connection below (over tcp:
// EPIPE, ENOTCONN) and must live: its Send fails as closed or dead and its
// Close returns. libfabric 1.17's rxm killed the process here when a write
// had gone as an inject (injectsSafely).
func TestFabricWritesIntoAnEndedConnection(t *testing.T) {
	const rounds = 20
	for round := 0; round < rounds; round++ {
		a, b := fabricPair(t, Config{Cells: 256})
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		received := make(chan struct{})
		go func() {
			var buf []byte
			var err error
			for n := 0; err == nil; n++ {
				if buf, err = b.Recv(ctx, buf); n == 100 {
					close(received)
				}
			}
		}()
		sendErr := make(chan error, 1)
		go func() {
			msg := []byte("a message small enough for one cell")
			for {
				if err := a.Send(ctx, msg); err != nil {
					sendErr <- err
					return
				}
			}
		}()
		<-received
		b.Close()
		if err := <-sendErr; !errors.Is(err, ErrClosed) && !errors.Is(err, ErrPeerDead) {
			t.Fatalf("round %d: Send to a closed peer: %v", round, err)
		}
		a.Close()
		cancel()
	}
}

// TestFabricSplitInjects sends puts just below, at and past each multiple
// of the provider's inject size, split into injects where the endpoint
// places writes in order, round a ring small enough to wrap many times;
// then again with the provider's queue reported full after every chunk,
// so that each split put resumes where it stopped. The receiver must see
// every byte: the last chunk's event must not come before the others'
// data, and no chunk may be written twice past a message's end.
func TestFabricSplitInjects(t *testing.T) {
	cfg := Config{Cells: 1024}
	a, b := fabricPair(t, cfg)
	defer a.Close()
	defer b.Close()
	l := a.l.(*fabricLink)
	if !l.splitInject || l.inject == 0 {
		t.Skipf("provider %s: inject size %d, ordered writes %v: puts are not split", fabricProvider, l.inject, l.splitInject)
	}
	limit := a.cfg.EagerLimit - headerSize // the largest put that is not a rendezvous
	var sizes []int
	for k := 1; k <= maxInjectSplit+1; k++ {
		for _, d := range []int{-1, 0, 1} {
			if n := k*l.inject + d - headerSize; n > 0 && n <= limit {
				sizes = append(sizes, n)
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, stutter := range []bool{false, true} {
		before := stutterSplitInjects(stutter)
		for round := range 8 { // 8 rounds of some 100 KiB: the 64 KiB ring wraps
			for i, n := range sizes {
				want := pattern(round*len(sizes)+i, n)
				if err := a.Send(ctx, want); err != nil {
					t.Fatal(err)
				}
				got, err := b.Recv(ctx, nil)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, want) {
					t.Fatalf("stutter %v, round %d: a put of %d bytes arrived as %d bytes, first difference at %d", stutter, round, n, len(got), firstDiff(got, want))
				}
			}
		}
		after := stutterSplitInjects(false)
		if stutter && after == before {
			t.Error("no split put was made to resume: the test no longer reaches that path")
		}
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// TestFabricQueueSignalsAreHarmless: a receiver ends the progress
// goroutine's blocking wait with a signal (cutWait), which may come when no
// one waits, or twice, or while a completion is being read. Signals fired
// all through a ping-pong, with pauses long enough for the progress
// goroutine to block, must lose no message and never fail the link.
func TestFabricQueueSignalsAreHarmless(t *testing.T) {
	a, b := fabricPair(t, Config{Cells: 256})
	defer a.Close()
	defer b.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			a.l.(*fabricLink).cutWait()
			b.l.(*fabricLink).cutWait()
			time.Sleep(20 * time.Microsecond)
		}
	}()
	defer func() { close(stop); <-done }()
	for i := range 600 {
		if i%100 == 99 {
			time.Sleep(2 * fabricBlockMs * time.Millisecond) // the progress goroutines block meanwhile
		}
		want := pattern(i, 1+i%300)
		if err := a.Send(ctx, want); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
		got, err := b.Recv(ctx, nil)
		if err != nil {
			t.Fatalf("receive %d: %v", i, err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("message %d differs", i)
		}
		if err := b.Send(ctx, got); err != nil {
			t.Fatalf("echo %d: %v", i, err)
		}
		if _, err := a.Recv(ctx, nil); err != nil {
			t.Fatalf("echo receive %d: %v", i, err)
		}
	}
}

// TestFabricRoundTripAllocatesNothing: a message over the fabric costs no
// allocation on either end, the receiver parked on the queue and a put
// split into injects (shm) or written whole included. A timer made per
// park and a split's progress word escaping to the heap each cost one, and
// together they brought the collector round every few milliseconds.
func TestFabricRoundTripAllocatesNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	a, b := fabricPair(t, Config{Cells: 1 << 12})
	ctx, cancel := context.WithCancel(context.Background())
	echoed := make(chan struct{})
	defer func() { cancel(); b.Close(); a.Close(); <-echoed }()
	go func() {
		defer close(echoed)
		echoBack(ctx, a, 8192)
	}()
	for _, size := range []int{56, 5000} {
		msg, buf := bytes.Repeat([]byte{'x'}, size), make([]byte, 0, 8192)
		round := func() {
			if err := b.Send(ctx, msg); err != nil {
				t.Fatal(err)
			}
			got, err := b.Recv(ctx, buf[:0])
			if err != nil || len(got) != size {
				t.Fatalf("echo of %d bytes: %d bytes, %v", size, len(got), err)
			}
		}
		for range 100 {
			round()
		}
		if n := testing.AllocsPerRun(500, round); n > 0 {
			t.Errorf("a round trip of %d bytes allocates %.2f times", size, n)
		}
	}
}

// TestFabricExclusiveCloseDuringLargeSend closes an exclusive end while a
// large Send copies its message into the rendezvous slot, reading the
// queue between chunks, with its peer already gone (so Close waits for
// nothing). Close does not wait for an exclusive end's running calls and
// closes the endpoint: a poll of it after that crashed the process.
func TestFabricExclusiveCloseDuringLargeSend(t *testing.T) {
	const size = 64 << 20
	msg := make([]byte, size)
	for round := 0; round < 3; round++ {
		a, b := fabricPair(t, Config{Cells: 64, MaxMessage: size, Exclusive: true})
		b.l.(*fabricLink).setDead(ErrPeerDead)
		done := make(chan error, 1)
		go func() { done <- b.Send(context.Background(), msg) }()
		time.Sleep(time.Duration(round+1) * 100 * time.Microsecond)
		b.Close()
		if err := <-done; err != nil && !errors.Is(err, ErrClosed) && !errors.Is(err, ErrPeerDead) {
			t.Fatalf("round %d: Send during Close: %v", round, err)
		}
		a.Close()
	}
}

// TestFabricReleasedRoleWakesParkedWaiter: a receiver that finds the
// progress role taken parks; whoever gives the role up must wake it, as
// nobody else reads the queue for it meanwhile. A large Send's copy takes
// the role between chunks (progressIfFree) and once gave it up without a
// wake-up: the receiver's next message waited out its park. The park is
// made a minute long here, so a missed wake-up fails the test rather than
// costing milliseconds.
func TestFabricReleasedRoleWakesParkedWaiter(t *testing.T) {
	defer func(w time.Duration) { fabricParkWait = w }(fabricParkWait)
	fabricParkWait = time.Minute
	a, b := fabricPair(t, Config{Cells: 64})
	defer a.Close()
	defer b.Close()
	l := b.l.(*fabricLink)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := 0; i < 5; i++ {
		l.role <- struct{}{} // taken, as between the chunks of a copy
		got := make(chan error, 1)
		go func() {
			_, err := b.Recv(ctx, nil)
			got <- err
		}()
		for parkBy := time.Now().Add(10 * time.Second); l.waiters.Load() == 0 || !l.sleeping.Load(); {
			if time.Now().After(parkBy) {
				t.Fatalf("round %d: the receiver never parked", i)
			}
			time.Sleep(100 * time.Microsecond) // until the receiver parks
		}
		l.releaseRole()
		if err := a.Send(ctx, []byte("ping")); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-got:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("round %d: the receiver stayed parked after the role was given up", i)
		}
	}
}

// TestFabricPingPongSendsNoCreditPerMessage: a receiver that parks between
// messages must not return its credits first, as a shared-memory one does
// with a store: over the fabric each return is an RMA write, a message of
// its own. They doubled the messages of a ping-pong, and took 29% of its
// processor time over libfabric's net.
func TestFabricPingPongSendsNoCreditPerMessage(t *testing.T) {
	a, b := fabricPair(t, Config{})
	defer a.Close()
	defer b.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const rounds = 1000
	go echoBack(ctx, b, 64)
	la, lb := a.l.(*fabricLink), b.l.(*fabricLink)
	heardA, heardB := la.heard.Load(), lb.heard.Load()
	start := time.Now()
	buf := make([]byte, 8)
	for i := 0; i < rounds; i++ {
		if err := a.Send(ctx, []byte("ping")); err != nil {
			t.Fatal(err)
		}
		if _, err := a.Recv(ctx, buf); err != nil {
			t.Fatal(err)
		}
	}
	// Each end hears the other's puts, a heartbeat per Config.Heartbeat
	// and a credit return per CreditThreshold cells (a quarter of the ring).
	beats := uint64(time.Since(start)/(50*time.Millisecond)) + 2
	allowed := uint64(rounds) + beats + 2
	if got := la.heard.Load() - heardA; got > allowed {
		t.Errorf("the sender heard %d signals for %d replies (at most %d expected): credits returned per message", got, rounds, allowed)
	}
	if got := lb.heard.Load() - heardB; got > allowed {
		t.Errorf("the echo heard %d signals for %d messages (at most %d expected): credits returned per message", got, rounds, allowed)
	}
}
