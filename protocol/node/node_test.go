package node_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/rrefkit/rref/internal/freeport"
	"github.com/rrefkit/rref/protocol"
	"github.com/rrefkit/rref/protocol/internal/pinger"
	"github.com/rrefkit/rref/protocol/internal/pingpb"
	"github.com/rrefkit/rref/protocol/node"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testTimeout bounds each test's waits: far above a loaded machine's
// link set-up, far below go test's own timeout.
const testTimeout = 30 * time.Second

// freeAddrs picks n distinct loopback addresses.
func freeAddrs(t *testing.T, n int) []string {
	out, err := freeport.Loopback(n)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func config(name protocol.NodeID, addrs []string) node.Config {
	return node.Config{Name: name, Peers: []node.Peer{{"a", addrs[0]}, {"b", addrs[1]}}, Secret: []byte("test secret"), Redial: 10 * time.Millisecond}
}

// startBoth starts the pinger a and the ponger b at once: each Start
// waits for the other.
func startBoth(t *testing.T, ctx context.Context, addrs []string, stateFile string) (*node.Node, *node.Node) {
	t.Helper()
	type res struct {
		n   *node.Node
		err error
	}
	bc := make(chan res, 1)
	go func() {
		b, err := node.Start(ctx, config("b", addrs), pingpb.PongerRole(func() pingpb.PongerHandler { return &pinger.Ponger{} }))
		bc <- res{b, err}
	}()
	ca := config("a", addrs)
	ca.StateFile = stateFile
	a, err := node.Start(ctx, ca, pingpb.PingerRole(func() pingpb.PingerHandler { return &pinger.Pinger{Peer: "b", Rounds: 3} }))
	br := <-bc
	if err != nil || br.err != nil {
		t.Fatalf("start: %v, %v", err, br.err)
	}
	return a, br.n
}

// waitState polls node n until its machine is in state want.
func waitState(t *testing.T, ctx context.Context, n *node.Node, want int) *pinger.Pinger {
	t.Helper()
	for {
		var got int
		var p pinger.Pinger
		if err := n.Inspect(ctx, func(s int, h any) { got, p = s, *h.(*pinger.Pinger) }); err != nil {
			t.Fatal(err)
		}
		if got == want {
			return &p
		}
		select {
		case <-ctx.Done():
			t.Fatalf("state %d, want %d: %v", got, want, ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// shmGroups counts the shared-memory groups the tests make, so that each
// has a name of its own (the names are the host's: the process id too).
var shmGroups atomic.Int64

// transports are the links a test runs over, as the pair of addresses of
// a and b: both on tcp, both on one shared-memory group, and each of the
// mixed orders (the shared-memory node dials the tcp one).
var transports = []struct {
	name  string
	addrs func(t *testing.T) []string
}{
	{"tcp", func(t *testing.T) []string { return freeAddrs(t, 2) }},
	{"shm", func(t *testing.T) []string { g := shmGroup(); return []string{g, g} }},
	{"a-shm-b-tcp", func(t *testing.T) []string { return []string{shmGroup(), freeAddrs(t, 1)[0]} }},
	{"a-tcp-b-shm", func(t *testing.T) []string { return []string{freeAddrs(t, 1)[0], shmGroup()} }},
}

func shmGroup() string {
	return fmt.Sprintf("shm:nodetest-%d-%d", os.Getpid(), shmGroups.Add(1))
}

// TestPingPong: the handlers the world explores run over tcp, shared
// memory and both mixed, and an input the guard refuses is refused.
func TestPingPong(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) { testPingPong(t, tr.addrs(t)) })
	}
}

func testPingPong(t *testing.T, addrs []string) {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	a, b := startBoth(t, ctx, addrs, filepath.Join(t.TempDir(), "a.state"))
	defer b.Close()
	defer a.Close()
	for range 3 {
		if err := node.Input(ctx, a, pingpb.PingerOnPing); err != nil {
			t.Fatal(err)
		}
		waitState(t, ctx, a, int(pingpb.PingerIdle))
	}
	if err := node.Input(ctx, a, pingpb.PingerOnPing); !errors.Is(err, node.ErrDisabled) {
		t.Fatalf("a fourth ping: %v, want ErrDisabled (the guard)", err)
	}
	if err := node.Input(ctx, b, pingpb.PongerOnQuit); !errors.Is(err, node.ErrDisabled) {
		t.Fatalf("quit: %v, want ErrDisabled", err)
	}
}

// TestRestartKeepsTheRecord: a pinger closed and started again (as after
// a crash) takes up its count from its state file, and its ponger, whose
// link broke, is linked to it again, over every transport.
func TestRestartKeepsTheRecord(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) { testRestartKeepsTheRecord(t, tr.addrs(t)) })
	}
}

func testRestartKeepsTheRecord(t *testing.T, addrs []string) {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	state := filepath.Join(t.TempDir(), "a.state")
	a, b := startBoth(t, ctx, addrs, state)
	defer b.Close()
	if err := node.Input(ctx, a, pingpb.PingerOnPing); err != nil {
		t.Fatal(err)
	}
	waitState(t, ctx, a, int(pingpb.PingerIdle))
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	ca := config("a", addrs)
	ca.StateFile = state
	a, err := node.Start(ctx, ca, pingpb.PingerRole(func() pingpb.PingerHandler { return &pinger.Pinger{Peer: "b", Rounds: 3} }))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if p := waitState(t, ctx, a, int(pingpb.PingerIdle)); p.Answers != 1 {
		t.Fatalf("restarted with %d answers, want 1", p.Answers)
	}
	if err := node.Input(ctx, a, pingpb.PingerOnPing); err != nil {
		t.Fatal(err)
	}
	if p := waitState(t, ctx, a, int(pingpb.PingerIdle)); p.Answers != 2 {
		t.Fatalf("%d answers, want 2", p.Answers)
	}
}

// TestUndeclaredEventStopsTheNode: a ponger that quit and then receives a
// ping stops with ErrUndeclared, as the world reports it.
func TestUndeclaredEventStopsTheNode(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	addrs := freeAddrs(t, 2)
	bc := make(chan *node.Node, 1)
	go func() {
		b, err := node.Start(ctx, config("b", addrs), pingpb.PongerRole(func() pingpb.PongerHandler { return &pinger.Ponger{MayQuit: true} }))
		if err != nil {
			t.Error(err)
		}
		bc <- b
	}()
	a, err := node.Start(ctx, config("a", addrs), pingpb.PingerRole(func() pingpb.PingerHandler { return &pinger.Pinger{Peer: "b", Rounds: 1} }))
	b := <-bc
	if err != nil || b == nil {
		t.Fatal(err)
	}
	defer a.Close()
	if err := node.Input(ctx, b, pingpb.PongerOnQuit); err != nil {
		t.Fatal(err)
	}
	if err := node.Input(ctx, a, pingpb.PingerOnPing); err != nil {
		t.Fatal(err)
	}
	select {
	case <-b.Done():
	case <-ctx.Done():
		t.Fatal("the ponger did not stop")
	}
	if err := b.Close(); !errors.Is(err, protocol.ErrUndeclared) {
		t.Fatalf("%v, want ErrUndeclared", err)
	}
}

func TestStartRefusesBadConfigs(t *testing.T) {
	ctx := context.Background()
	role := pingpb.PongerRole(func() pingpb.PongerHandler { return &pinger.Ponger{} })
	for name, cfg := range map[string]node.Config{
		"not a peer":        {Name: "c", Peers: []node.Peer{{"a", "127.0.0.1:1"}}},
		"duplicate":         {Name: "a", Peers: []node.Peer{{"a", "127.0.0.1:1"}, {"a", "127.0.0.1:2"}}},
		"no address":        {Name: "a", Peers: []node.Peer{{"a", ""}, {"b", "127.0.0.1:2"}}},
		"no group":          {Name: "a", Peers: []node.Peer{{"a", "shm:"}, {"b", "127.0.0.1:2"}}},
		"fabric beside tcp": {Name: "a", Peers: []node.Peer{{"a", "fabric:127.0.0.1:1"}, {"b", "127.0.0.1:2"}}},
		"bad fabric":        {Name: "a", Peers: []node.Peer{{"a", "fabric:@127.0.0.1:1"}, {"b", "fabric:127.0.0.1:2"}}},
		// Two shared-memory groups share no transport: neither listens on tcp.
		"two groups": {Name: "a", Peers: []node.Peer{{"a", "shm:g1"}, {"b", "shm:g2"}}},
	} {
		if _, err := node.Start(ctx, cfg, role); !errors.Is(err, node.ErrConfig) {
			t.Errorf("%s: %v, want ErrConfig", name, err)
		}
	}
}
