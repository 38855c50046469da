package etcdgroup_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"slices"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"
	"go.uber.org/zap"

	"github.com/rrefkit/rref/internal/freeport"
	"github.com/rrefkit/rref/runtime/etcdgroup"
	"github.com/rrefkit/rref/runtime/worker"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// requireEtcdEnv makes a missing etcd binary fail the tests instead of
// skipping them: CI installs Debian's etcd-server and sets it.
const requireEtcdEnv = "RREF_REQUIRE_ETCD"

// testTimeout bounds each test: far above a loaded host's etcd start-up.
const testTimeout = 60 * time.Second

// etcdServer is a real etcd, Debian's etcd-server, in a process of its own
// on loopback ports, which a test can kill and start again on its data.
type etcdServer struct {
	t          *testing.T
	dir        string
	client     string // its client URL
	peer       string
	cmd        *exec.Cmd
	exited     chan struct{}
	sync.Mutex // guards cmd and exited
}

func startEtcd(t *testing.T) *etcdServer {
	t.Helper()
	bin, err := exec.LookPath("etcd")
	if err != nil {
		if os.Getenv(requireEtcdEnv) != "" {
			t.Fatalf("%s is set but there is no etcd binary: apt-get install etcd-server", requireEtcdEnv)
		}
		t.Skip("no etcd binary (Debian: etcd-server); CI installs it")
	}
	addrs, err := freeport.Loopback(2)
	if err != nil {
		t.Fatal(err)
	}
	s := &etcdServer{t: t, dir: t.TempDir(), client: "http://" + addrs[0], peer: "http://" + addrs[1]}
	s.start(bin)
	t.Cleanup(s.kill)
	return s
}

func (s *etcdServer) start(bin string) {
	s.Lock()
	defer s.Unlock()
	s.cmd = exec.Command(bin, "--data-dir", s.dir, "--name", "rref-test",
		"--listen-client-urls", s.client, "--advertise-client-urls", s.client,
		"--listen-peer-urls", s.peer, "--initial-advertise-peer-urls", s.peer,
		"--initial-cluster", "rref-test="+s.peer, "--log-level", "error")
	if err := s.cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	exited := make(chan struct{})
	s.exited = exited
	go func(cmd *exec.Cmd) { cmd.Wait(); close(exited) }(s.cmd)
}

// kill ends the server as a crash would, its data kept.
func (s *etcdServer) kill() {
	s.Lock()
	defer s.Unlock()
	if s.cmd != nil {
		s.cmd.Process.Kill()
		<-s.exited
		s.cmd = nil
	}
}

func (s *etcdServer) restart() {
	s.kill()
	bin, _ := exec.LookPath("etcd")
	s.start(bin)
}

// newClient is a client of s, closed with the test.
func (s *etcdServer) newClient(t *testing.T) *clientv3.Client {
	t.Helper()
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{s.client}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

type result struct {
	g   *etcdgroup.Group
	cli *clientv3.Client
	err error
}

// rendezvous runs the members' rendezvous at once, each with a client of
// its own, and returns their results in order.
func rendezvous(t *testing.T, ctx context.Context, s *etcdServer, prefix string, size int, names []string, addrs []string) []result {
	t.Helper()
	out := make([]result, len(names))
	var wg sync.WaitGroup
	for i, n := range names {
		wg.Add(1)
		cli := s.newClient(t)
		go func() {
			defer wg.Done()
			g, err := etcdgroup.Rendezvous(ctx, etcdgroup.Config{Client: cli, Prefix: prefix, Name: n, Addr: addrs[i], Size: size, TTL: 2 * time.Second})
			out[i] = result{g, cli, err}
		}()
	}
	wg.Wait()
	return out
}

// TestRendezvousStartsAGroup: four members find each other through etcd,
// read one view, and start workers from it that call each other and pass
// a reference around.
func TestRendezvousStartsAGroup(t *testing.T) {
	s := startEtcd(t)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	names := []string{"d", "a", "c", "b"}
	addrs, err := freeport.Loopback(len(names))
	if err != nil {
		t.Fatal(err)
	}
	rs := rendezvous(t, ctx, s, "/rref/start", len(names), names, addrs)
	for i, r := range rs {
		if r.err != nil {
			t.Fatalf("%s: %v", names[i], r.err)
		}
		defer r.g.Close(ctx)
		if !slices.Equal(r.g.Peers, rs[0].g.Peers) || r.g.View != rs[0].g.View {
			t.Fatalf("%s read view %d %v, %s read %d %v", names[i], r.g.View, r.g.Peers, names[0], rs[0].g.View, rs[0].g.Peers)
		}
		if r.g.Incarnation == 0 || r.g.Incarnation > r.g.View {
			t.Errorf("%s: incarnation %d, view %d", names[i], r.g.Incarnation, r.g.View)
		}
	}
	if len(rs[0].g.Peers) != len(names) {
		t.Fatalf("view %v, want %d members", rs[0].g.Peers, len(names))
	}
	secret := []byte("etcdgroup test")
	ws := make([]*worker.Worker, len(names))
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	for i, n := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ws[i], errs[i] = worker.Start(ctx, n, rs[i].g.Peers, secret, worker.Config{Setup: func(w *worker.Worker) {
				worker.Register(w, "inc", func(ctx context.Context, x int) (int, error) { return x + 1, nil })
			}})
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("start %s: %v", names[i], err)
		}
	}
	defer worker.ShutdownGroup(context.Background(), ws)
	x := 0
	for i := range ws {
		next := names[(i+1)%len(names)]
		if x, err = worker.Call[int](ctx, ws[i], next, "inc", x); err != nil {
			t.Fatal(err)
		}
	}
	if x != len(names) {
		t.Fatalf("around the ring: %d, want %d", x, len(names))
	}
	r, err := worker.Remote[int](ctx, ws[0], names[2], "inc", 41)
	if err != nil {
		t.Fatal(err)
	}
	if v, err := r.ToHere(ctx); err != nil || v != 42 {
		t.Fatalf("remote: %d, %v", v, err)
	}
	r.Release()
}

// TestNameTakenAtOnce: a second process under a live member's name is
// refused at once, naming the address that holds it, not after a timeout.
func TestNameTakenAtOnce(t *testing.T) {
	s := startEtcd(t)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	first := make(chan error, 1)
	waiting, stop := context.WithCancel(ctx)
	defer stop()
	go func() {
		_, err := etcdgroup.Rendezvous(waiting, etcdgroup.Config{Client: s.newClient(t), Prefix: "/rref/taken", Name: "a", Addr: "127.0.0.1:1", Size: 2})
		first <- err
	}()
	// The second comes once the first holds the name.
	cli := s.newClient(t)
	for {
		resp, err := cli.Get(ctx, "/rref/taken/members/a")
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Kvs) == 1 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	start := time.Now()
	_, err := etcdgroup.Rendezvous(ctx, etcdgroup.Config{Client: cli, Prefix: "/rref/taken", Name: "a", Addr: "127.0.0.1:2", Size: 2})
	if !errors.Is(err, etcdgroup.ErrNameTaken) {
		t.Fatalf("%v, want ErrNameTaken", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("refused after %v: want at once", took)
	}
	stop()
	if err := <-first; !errors.Is(err, context.Canceled) {
		t.Fatalf("the waiting member: %v, want its context's end", err)
	}
	// Its rendezvous ended: the name is free again at once (revoked).
	done, cancelDone := context.WithTimeout(ctx, 3*time.Second)
	defer cancelDone()
	_, err = etcdgroup.Rendezvous(done, etcdgroup.Config{Client: cli, Prefix: "/rref/taken", Name: "a", Addr: "127.0.0.1:2", Size: 2})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("after the first gave up: %v, want to wait for a second member", err)
	}
}

// TestSealedGroupRefusesLateAndRestarted: a member beyond the size is
// refused with ErrSealed; a member that dies and comes back under its name
// is refused with ErrNameTaken while its old lease lives, and with
// ErrSealed, as a new incarnation, once it ran out.
func TestSealedGroupRefusesLateAndRestarted(t *testing.T) {
	s := startEtcd(t)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	rs := rendezvous(t, ctx, s, "/rref/sealed", 2, []string{"a", "b"}, []string{"127.0.0.1:1", "127.0.0.1:2"})
	for _, r := range rs {
		if r.err != nil {
			t.Fatal(r.err)
		}
	}
	late := rendezvous(t, ctx, s, "/rref/sealed", 2, []string{"c"}, []string{"127.0.0.1:3"})
	if !errors.Is(late[0].err, etcdgroup.ErrSealed) {
		t.Fatalf("a third member: %v, want ErrSealed", late[0].err)
	}
	// b's process dies: its client stops keeping the lease alive, and
	// nothing revokes it.
	rs[1].cli.Close()
	select {
	case <-rs[1].g.Lost():
	case <-ctx.Done():
		t.Fatal("b's registration never reported lost after its client closed")
	}
	again := rendezvous(t, ctx, s, "/rref/sealed", 2, []string{"b"}, []string{"127.0.0.1:4"})
	if !errors.Is(again[0].err, etcdgroup.ErrNameTaken) {
		t.Fatalf("b back at once: %v, want ErrNameTaken (its old lease lives for its TTL)", again[0].err)
	}
	for {
		time.Sleep(500 * time.Millisecond)
		again = rendezvous(t, ctx, s, "/rref/sealed", 2, []string{"b"}, []string{"127.0.0.1:4"})
		if !errors.Is(again[0].err, etcdgroup.ErrNameTaken) || ctx.Err() != nil {
			break
		}
	}
	if !errors.Is(again[0].err, etcdgroup.ErrSealed) {
		t.Fatalf("b back after its lease ran out: %v, want ErrSealed (a new incarnation after the view)", again[0].err)
	}
}

// TestEtcdRestartDuringRendezvous: the etcd server is killed after two of
// three members registered and started again on its data; the third
// registers, and all three read the same view.
func TestEtcdRestartDuringRendezvous(t *testing.T) {
	s := startEtcd(t)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	names := []string{"a", "b", "c"}
	out := make(chan result, 2)
	for _, n := range names[:2] {
		cli := s.newClient(t)
		go func() {
			g, err := etcdgroup.Rendezvous(ctx, etcdgroup.Config{Client: cli, Prefix: "/rref/restart", Name: n, Addr: "127.0.0.1:1" + n, Size: 3, TTL: 5 * time.Second})
			out <- result{g: g, err: err}
		}()
	}
	watcher := s.newClient(t)
	for {
		resp, err := watcher.Get(ctx, "/rref/restart/members/", clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			t.Fatal(err)
		}
		if resp.Count == 2 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	s.restart()
	third := rendezvous(t, ctx, s, "/rref/restart", 3, names[2:], []string{"127.0.0.1:1c"})
	if third[0].err != nil {
		t.Fatalf("c after the restart: %v", third[0].err)
	}
	for range 2 {
		r := <-out
		if r.err != nil {
			t.Fatalf("a member registered before the restart: %v", r.err)
		}
		if !slices.Equal(r.g.Peers, third[0].g.Peers) {
			t.Fatalf("views differ: %v and %v", r.g.Peers, third[0].g.Peers)
		}
	}
}

// TestRefusesBadConfigs: each is refused at once with ErrConfig.
func TestRefusesBadConfigs(t *testing.T) {
	cli := &clientv3.Client{}
	for name, cfg := range map[string]etcdgroup.Config{
		"no client":    {Prefix: "/g", Name: "a", Addr: "x", Size: 1},
		"no prefix":    {Client: cli, Name: "a", Addr: "x", Size: 1},
		"slash prefix": {Client: cli, Prefix: "/g/", Name: "a", Addr: "x", Size: 1},
		"no name":      {Client: cli, Prefix: "/g", Addr: "x", Size: 1},
		"slash name":   {Client: cli, Prefix: "/g", Name: "a/b", Addr: "x", Size: 1},
		"no address":   {Client: cli, Prefix: "/g", Name: "a", Size: 1},
		"no size":      {Client: cli, Prefix: "/g", Name: "a", Addr: "x"},
		"short TTL":    {Client: cli, Prefix: "/g", Name: "a", Addr: "x", Size: 1, TTL: time.Millisecond},
	} {
		if _, err := etcdgroup.Rendezvous(context.Background(), cfg); !errors.Is(err, etcdgroup.ErrConfig) {
			t.Errorf("%s: %v, want ErrConfig", name, err)
		}
	}
}

// TestCorruptViewIsRefused: a view in etcd that does not decode (written
// by another program, or truncated) is refused with ErrBadView, naming
// its key, never read as a group.
func TestCorruptViewIsRefused(t *testing.T) {
	s := startEtcd(t)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	cli := s.newClient(t)
	for name, value := range map[string]string{"garbage": "\xff\xff\xff\xff", "empty": "", "trailing": "\x01\x02\x00\x07"} {
		prefix := "/rref/corrupt-" + name
		if _, err := cli.Put(ctx, prefix+"/view", value); err != nil {
			t.Fatal(err)
		}
		_, err := etcdgroup.Rendezvous(ctx, etcdgroup.Config{Client: cli, Prefix: prefix, Name: "a", Addr: "127.0.0.1:1", Size: 1})
		if !errors.Is(err, etcdgroup.ErrBadView) {
			t.Errorf("%s view: %v, want ErrBadView", name, err)
		}
		t.Logf("%s: %v", name, err)
	}
}
