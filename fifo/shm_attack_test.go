//go:build linux

package fifo

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// shmPeerEnv starts this test binary as one end of a shared-memory
// connection (see runSHMPeer), before TestMain: "MODE,NAME".
const shmPeerEnv = "RREF_FIFO_SHMPEER"

// Exit codes of a peer.
const (
	peerRefused = 3 // the handshake was refused (ErrAuth), as a test expected
	peerFailed  = 1
)

func init() {
	if spec := os.Getenv(shmPeerEnv); spec != "" {
		os.Exit(runSHMPeer(spec))
	}
}

// runSHMPeer is the other process of the tests below. listen and dial
// attach, print "attached" and echo until the connection ends (or the
// process is killed); dial-wrong dials with a wrong secret.
func runSHMPeer(spec string) int {
	mode, name, _ := strings.Cut(spec, ",")
	if strings.HasPrefix(mode, "foreign-") {
		return runForeignPeer(mode, name)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var c *Conn
	var err error
	switch mode {
	case "listen":
		c, err = ListenSHM(ctx, name, secret, Config{Cells: 256})
	case "dial":
		c, err = DialSHM(ctx, name, secret, Config{Cells: 256})
	case "dial-wrong":
		_, err = DialSHM(ctx, name, []byte("not the secret"), Config{Cells: 256})
		if errors.Is(err, ErrAuth) {
			return peerRefused
		}
		fmt.Fprintln(os.Stderr, "peer: a wrong secret was not refused:", err)
		return peerFailed
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "peer:", err)
		return peerFailed
	}
	fmt.Println("attached")
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

type shmPeer struct {
	cmd *exec.Cmd
	out *bufio.Reader
}

func startSHMPeer(t *testing.T, mode, name string) *shmPeer {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), shmPeerEnv+"="+mode+","+name)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &shmPeer{cmd: cmd, out: bufio.NewReader(out)}
	t.Cleanup(func() {
		p.cmd.Process.Kill()
		p.cmd.Wait()
	})
	return p
}

// attached waits for the peer to say it attached.
func (p *shmPeer) attached(t *testing.T) {
	t.Helper()
	line, err := p.out.ReadString('\n')
	if err != nil || line != "attached\n" {
		t.Fatalf("peer: %q, %v", line, err)
	}
}

func (p *shmPeer) kill(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	p.cmd.Wait()
}

// socketListed reports whether an abstract socket is bound (/proc/net/unix
// lists abstract names with '@').
func socketListed(t *testing.T, addr string) bool {
	t.Helper()
	b, err := os.ReadFile("/proc/net/unix")
	if err != nil {
		t.Skip("no /proc/net/unix:", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		// Only a listening socket (flag __SO_ACCEPTCON) holds the name: a
		// connection accepted on it, which a live end keeps open to watch
		// its peer, is listed under the same name.
		if f := strings.Fields(line); len(f) >= 8 && f[len(f)-1] == addr {
			if flags, err := strconv.ParseUint(f[3], 16, 32); err == nil && flags&soAcceptCon != 0 {
				return true
			}
		}
	}
	return false
}

// soAcceptCon is the listening flag in /proc/net/unix's Flags column.
const soAcceptCon = 0x10000

// noLeftovers checks that nothing named after the connection is left
// under /dev/shm and that its socket is gone.
func noLeftovers(t *testing.T, name string) {
	t.Helper()
	entries, err := os.ReadDir(SHMDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.Contains(e.Name(), name) {
			t.Errorf("%s/%s left behind", SHMDir, e.Name())
		}
	}
	if addr := shmSocket(name, os.Getuid()); socketListed(t, addr) {
		t.Errorf("socket %s still bound", addr)
	}
}

// restartWorks connects under name again, both ends here, at once.
func restartWorks(t *testing.T, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	var a *Conn
	var err error
	done := make(chan struct{})
	go func() {
		defer close(done)
		a, err = ListenSHM(ctx, name, secret, Config{Cells: 256})
	}()
	b, derr := DialSHM(ctx, name, secret, Config{Cells: 256})
	<-done
	if err != nil || derr != nil {
		t.Fatalf("restart under %q: %v, %v", name, err, derr)
	}
	took := time.Since(start)
	defer a.Close()
	defer b.Close()
	if took > time.Second {
		t.Fatalf("a restart under the same name took %v", took)
	}
	echoCheck(t, a, b)
}

// echoThrough sends a few messages through a peer that echoes them.
func echoThrough(t *testing.T, c *Conn) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i, n := range []int{3, 100, 100_000} {
		if err := c.Send(ctx, pattern(i, n)); err != nil {
			t.Fatal(err)
		}
		got, err := c.Recv(ctx, nil)
		if err != nil || !bytes.Equal(got, pattern(i, n)) {
			t.Fatalf("echo of %d bytes: %v", n, err)
		}
	}
}

func shmName(t *testing.T, what string) string {
	return fmt.Sprintf("rref-test-%s-%d", what, os.Getpid())
}

// TestSHMOtherProcessWithoutSecret: another process of this user that
// does not know the secret is refused, and the listener still takes the
// member that comes next.
func TestSHMOtherProcessWithoutSecret(t *testing.T) {
	name := shmName(t, "nosecret")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	type res struct {
		c   *Conn
		err error
	}
	listened := make(chan res, 1)
	go func() {
		c, err := ListenSHM(ctx, name, secret, Config{Cells: 256})
		listened <- res{c, err}
	}()
	intruder := startSHMPeer(t, "dial-wrong", name)
	err := intruder.cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != peerRefused {
		t.Fatalf("a process without the secret: %v, want exit %d (refused)", err, peerRefused)
	}
	member := startSHMPeer(t, "dial", name)
	r := <-listened
	if r.err != nil {
		t.Fatal(r.err)
	}
	defer r.c.Close()
	member.attached(t)
	echoThrough(t, r.c)
	noLeftovers(t, name)
}

// TestSHMPreCreatedFileIrrelevant: a file another user might have planted
// at the old path, of any size and mode, is neither opened nor touched.
func TestSHMPreCreatedFileIrrelevant(t *testing.T) {
	name := shmName(t, "planted")
	path := SHMDir + "/" + name
	junk := bytes.Repeat([]byte("hostile"), 1000)
	if err := os.WriteFile(path, junk, 0o666); err != nil {
		t.Skip("cannot plant a file:", err)
	}
	defer os.Remove(path)
	a, b := shmPairNamed(t, name, Config{Cells: 256})
	echoCheck(t, a, b)
	a.Close()
	b.Close()
	if got, err := os.ReadFile(path); err != nil || !bytes.Equal(got, junk) {
		t.Fatalf("the planted file changed: %v", err)
	}
}

func shmPairNamed(t *testing.T, name string, cfg Config) (*Conn, *Conn) {
	t.Helper()
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

// TestSHMKillListenerBeforeAttach: a listener killed with SIGKILL before
// any peer attached leaves nothing, and the name is free at once.
func TestSHMKillListenerBeforeAttach(t *testing.T) {
	name := shmName(t, "kill-early")
	p := startSHMPeer(t, "listen", name)
	addr := shmSocket(name, os.Getuid())
	waitFor(t, 10*time.Second, "the listener's socket", func() bool { return socketListed(t, addr) })
	p.kill(t)
	noLeftovers(t, name)
	restartWorks(t, name)
}

// TestSHMKillAfterAttach kills either end with SIGKILL once attached: the
// survivor sees the peer dead, nothing is left, and the name works again
// at once.
func TestSHMKillAfterAttach(t *testing.T) {
	for _, killed := range []string{"listen", "dial"} {
		t.Run(killed, func(t *testing.T) {
			name := shmName(t, "kill-"+killed)
			cfg := Config{Cells: 256, Heartbeat: 10 * time.Millisecond, DeadAfter: 200 * time.Millisecond}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			p := startSHMPeer(t, killed, name)
			var c *Conn
			var err error
			if killed == "listen" {
				c, err = DialSHM(ctx, name, secret, cfg)
			} else {
				c, err = ListenSHM(ctx, name, secret, cfg)
			}
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			p.attached(t)
			echoThrough(t, c)
			p.kill(t)
			if _, err := c.Recv(ctx, nil); !errors.Is(err, ErrPeerDead) {
				t.Fatalf("Recv after the peer was killed: %v", err)
			}
			noLeftovers(t, name)
			restartWorks(t, name)
		})
	}
}

func TestSHMPeerUIDCheck(t *testing.T) {
	if err := checkPeerUID(1000, 1000, "dialer", "x"); err != nil {
		t.Fatalf("same user refused: %v", err)
	}
	err := checkPeerUID(4242, 1000, "dialer", "x")
	if !errors.Is(err, ErrAuth) || !strings.Contains(err.Error(), "runs as uid 4242, this process as uid 1000") {
		t.Fatalf("another user: %v", err)
	}
}

// TestSHMNameInUse: a name whose socket a live process holds (here a
// squatter without the secret) makes ListenSHM fail at once, and a dialer
// refuses the squatter.
func TestSHMNameInUse(t *testing.T) {
	name := shmName(t, "squat")
	squat, err := net.Listen("unix", shmSocket(name, os.Getuid()))
	if err != nil {
		t.Fatal(err)
	}
	defer squat.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	start := time.Now()
	_, err = ListenSHM(ctx, name, secret, Config{})
	if !errors.Is(err, syscall.EADDRINUSE) || !strings.Contains(err.Error(), "already listens") {
		t.Fatalf("listen on a name in use: %v", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("took %v", d)
	}
	go func() {
		nc, err := squat.Accept()
		if err != nil {
			return
		}
		defer nc.Close()
		io.ReadFull(nc, make([]byte, helloSize))
		nc.Write(bytes.Repeat([]byte{0xee}, helloSize+proofSize))
	}()
	if _, err := DialSHM(ctx, name, secret, Config{}); !errors.Is(err, ErrAuth) || !strings.Contains(err.Error(), "not an rrefkit fifo peer") {
		t.Fatalf("dial to a squatter: %v", err)
	}
}

// TestSHMListenerSurvivesStrays: a silent connection and garbage on the
// listener's socket do not delay a member.
func TestSHMListenerSurvivesStrays(t *testing.T) {
	name := shmName(t, "strays")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	type res struct {
		c   *Conn
		err error
	}
	listened := make(chan res, 1)
	go func() {
		c, err := ListenSHM(ctx, name, secret, Config{Cells: 256})
		listened <- res{c, err}
	}()
	addr := shmSocket(name, os.Getuid())
	waitFor(t, eventually, "the listener's socket", func() bool { return socketListed(t, addr) })
	silent, err := net.Dial("unix", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	garbage, err := net.Dial("unix", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer garbage.Close()
	garbage.Write(bytes.Repeat([]byte("junk"), 50))
	start := time.Now()
	b, err := DialSHM(ctx, name, secret, Config{Cells: 256})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	r := <-listened
	if r.err != nil {
		t.Fatal(r.err)
	}
	defer r.c.Close()
	if d := time.Since(start); d > time.Second {
		t.Fatalf("the member attached after %v", d)
	}
	echoCheck(t, r.c, b)
}

// TestSHMDialerChecksTheSegment: a listener that knows the secret but
// hands over something else than a sealed segment of the layout's size is
// refused before anything is mapped.
func TestSHMDialerChecksTheSegment(t *testing.T) {
	cfg := mustDefaults(Config{Cells: 256})
	size := layoutFor(cfg).total
	memfd := func(size int, seals int) int {
		fd, err := unix.MemfdCreate("test", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
		if err != nil {
			t.Fatal(err)
		}
		unix.Ftruncate(fd, int64(size))
		if seals != 0 {
			unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, seals)
		}
		return fd
	}
	devNull := func() int {
		fd, err := unix.Open("/dev/null", unix.O_RDWR|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		return fd
	}
	for _, tc := range []struct {
		what string
		fds  func() []int
		says string
	}{
		{"an unsealed memfd", func() []int { return []int{memfd(size, 0)} }, "not sealed"},
		{"a memfd of another size", func() []int { return []int{memfd(size/2, shmSeals)} }, "bytes, want"},
		{"a device", func() []int { return []int{devNull()} }, "not a memory file"},
		{"two descriptors", func() []int { return []int{memfd(size, shmSeals), memfd(size, shmSeals)} }, "2 descriptors"},
		{"no descriptor", func() []int { return nil }, "0 descriptors"},
	} {
		t.Run(tc.what, func(t *testing.T) {
			name := shmName(t, "bad-segment")
			ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: shmSocket(name, os.Getuid()), Net: "unix"})
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			served := make(chan error, 1)
			go func() {
				nc, err := ln.AcceptUnix()
				if err != nil {
					served <- err
					return
				}
				defer nc.Close()
				s := shake{ctx: ctx, nc: nc, peer: "dialer", secret: secret, cfg: cfg, transport: "shm"}
				if _, err := s.accept(); err != nil {
					served <- err
					return
				}
				fds := tc.fds()
				var oob []byte
				if len(fds) > 0 {
					oob = unix.UnixRights(fds...)
				}
				_, _, err = nc.WriteMsgUnix([]byte{verdictAccepted}, oob, nil)
				for _, fd := range fds {
					unix.Close(fd)
				}
				io.Copy(io.Discard, nc) // until the dialer leaves
				served <- err
			}()
			_, err = DialSHM(ctx, name, secret, cfg)
			if !errors.Is(err, ErrAuth) || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("dial given %s: %v, want it to say %q", tc.what, err, tc.says)
			}
			if err := <-served; err != nil {
				t.Fatal(err)
			}
		})
	}
}

// runForeignPeer runs as another user, under the name of this test's user
// (spec "NAME,UID"), knowing the secret: what SO_PEERCRED alone must stop.
// foreign-dial connects and says hello without checking the listener, and
// is refused if the listener closes without answering; foreign-listen
// takes the name and answers a dialer's handshake.
func runForeignPeer(mode, spec string) int {
	name, uidText, _ := strings.Cut(spec, ",")
	uid, _ := strconv.Atoi(uidText)
	addr := shmSocket(name, uid)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cfg := mustDefaults(Config{Cells: 256})
	switch mode {
	case "foreign-dial":
		var nc net.Conn
		var err error
		for nc == nil {
			if nc, err = net.Dial("unix", addr); err != nil {
				if ctx.Err() != nil {
					fmt.Fprintln(os.Stderr, "peer:", err)
					return peerFailed
				}
				time.Sleep(time.Millisecond)
			}
		}
		defer nc.Close()
		s := shake{ctx: ctx, nc: nc, peer: "listener", secret: secret, cfg: cfg, transport: "shm"}
		limit(ctx, nc, handshakeTimeout)
		// Closed without a word: at once (EOF), or reset, our hello unread.
		_, err = s.dial()
		if err != nil && !errors.Is(err, ErrAuth) && (errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)) {
			return peerRefused
		}
		fmt.Fprintln(os.Stderr, "peer: the listener answered another user:", err)
		return peerFailed
	case "foreign-listen":
		ln, err := net.Listen("unix", addr)
		if err != nil {
			fmt.Fprintln(os.Stderr, "peer:", err)
			return peerFailed
		}
		defer ln.Close()
		fmt.Println("attached") // listening
		nc, err := ln.Accept()
		if err != nil {
			return peerFailed
		}
		defer nc.Close()
		limit(ctx, nc, handshakeTimeout)
		s := shake{ctx: ctx, nc: nc, peer: "dialer", secret: secret, cfg: cfg, transport: "shm"}
		if _, err := s.accept(); err == nil {
			fmt.Fprintln(os.Stderr, "peer: a dialer proved the secret to another user")
			return peerFailed
		}
		return peerRefused
	}
	return peerFailed
}

// TestSHMForeignUser runs a process as another user (nobody), which knows
// the secret and uses this user's socket name: the listener drops its
// connection before any handshake, and a dialer refuses it as a listener.
// It needs root, to start a process as another user.
func TestSHMForeignUser(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to run a process as another user")
	}
	const nobody = 65534
	// A copy of this binary that the other user may run.
	dir, err := os.MkdirTemp("", "rref-foreign-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "fifo.test")
	b, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o755)
	start := func(mode, name string) *shmPeer {
		cmd := exec.Command(bin, "-test.run=^$")
		cmd.Env = append(os.Environ(), shmPeerEnv+"="+mode+","+name+","+strconv.Itoa(os.Getuid()))
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
		cmd.Stderr = os.Stderr
		out, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		p := &shmPeer{cmd: cmd, out: bufio.NewReader(out)}
		t.Cleanup(func() {
			p.cmd.Process.Kill()
			p.cmd.Wait()
		})
		return p
	}
	exitCode := func(p *shmPeer) int {
		err := p.cmd.Wait()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode()
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0
	}

	t.Run("dialer", func(t *testing.T) {
		name := shmName(t, "foreign-dialer")
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		type res struct {
			c   *Conn
			err error
		}
		listened := make(chan res, 1)
		go func() {
			c, err := ListenSHM(ctx, name, secret, Config{Cells: 256})
			listened <- res{c, err}
		}()
		if code := exitCode(start("foreign-dial", name)); code != peerRefused {
			t.Fatalf("another user's dialer: exit %d, want %d (dropped before the handshake)", code, peerRefused)
		}
		b, err := DialSHM(ctx, name, secret, Config{Cells: 256})
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		r := <-listened
		if r.err != nil {
			t.Fatal(r.err)
		}
		defer r.c.Close()
		echoCheck(t, r.c, b)
	})
	t.Run("listener", func(t *testing.T) {
		name := shmName(t, "foreign-listener")
		p := start("foreign-listen", name)
		p.attached(t)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, err := DialSHM(ctx, name, secret, Config{Cells: 256})
		if !errors.Is(err, ErrAuth) || !strings.Contains(err.Error(), fmt.Sprintf("runs as uid %d", nobody)) {
			t.Fatalf("dial to another user's listener: %v", err)
		}
		p.cmd.Process.Kill()
	})
}

// BenchmarkHandshakeSHM is a whole shared-memory set-up in one process:
// listen, dial (until the socket is up), challenge-response, memfd hand-over,
// both mappings.
func BenchmarkHandshakeSHM(b *testing.B) {
	ctx := context.Background()
	name := fmt.Sprintf("rref-bench-handshake-%d", os.Getpid())
	for b.Loop() {
		acc := make(chan *Conn, 1)
		go func() {
			c, _ := ListenSHM(ctx, name, secret, Config{Cells: 256})
			acc <- c
		}()
		d, err := DialSHM(ctx, name, secret, Config{Cells: 256})
		if err != nil {
			b.Fatal(err)
		}
		d.Close()
		(<-acc).Close()
	}
}

// TestSHMKillNoticedAtOnce: with a liveness bound long enough to ride out
// pauses, a killed peer is still dead at once: its hand-over socket, kept
// open, closes with its process. A paused peer keeps it open.
func TestSHMKillNoticedAtOnce(t *testing.T) {
	const deadAfter = time.Minute // the heartbeat alone would take this long
	name := shmName(t, "kill-at-once")
	cfg := Config{Cells: 256, DeadAfter: deadAfter}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	p := startSHMPeer(t, "dial", name)
	c, err := ListenSHM(ctx, name, secret, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	p.attached(t)
	echoThrough(t, c)
	p.cmd.Process.Signal(syscall.SIGSTOP)
	time.Sleep(300 * time.Millisecond)
	if err := c.Send(ctx, []byte("still there?")); err != nil {
		t.Fatalf("a paused peer was taken for dead: %v", err)
	}
	start := time.Now()
	p.kill(t)
	if _, err := c.Recv(ctx, nil); !errors.Is(err, ErrPeerDead) {
		t.Fatalf("Recv after the peer was killed: %v", err)
	}
	if d := time.Since(start); d > deadAfter/2 {
		t.Fatalf("a killed peer noticed only after %v", d)
	}
}
