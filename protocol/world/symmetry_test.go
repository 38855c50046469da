package world_test

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/rrefkit/rref/explore"
	"github.com/rrefkit/rref/gen"
	"github.com/rrefkit/rref/internal/cli"
	"github.com/rrefkit/rref/protocol"
	"github.com/rrefkit/rref/protocol/internal/mutexpb"
	"github.com/rrefkit/rref/protocol/world"
	"github.com/rrefkit/rref/spec"
)

// TestMutexGeneratedIsFresh fails when mutexpb is not what rrefgen makes
// of its spec today (run go generate ./protocol/internal/mutexpb).
func TestMutexGeneratedIsFresh(t *testing.T) {
	src, err := os.ReadFile("../internal/mutexpb/mutex.rspec")
	if err != nil {
		t.Fatal(err)
	}
	p, err := spec.Parse("mutex.rspec", src)
	if err != nil {
		t.Fatal(err)
	}
	files, err := gen.Generate(p, "github.com/rrefkit/rref/protocol/internal/mutexpb")
	if err != nil {
		t.Fatal(err)
	}
	diffs, err := cli.Stale("../internal/mutexpb", files)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range diffs {
		t.Error(d)
	}
}

// lockServer grants the lock in the order asked, naming the holder in
// each grant, and saves who holds it and who waits, to start again from.
type lockServer struct {
	Holder  protocol.NodeID
	Queue   []protocol.NodeID // an order that matters: renamed, it is another queue
	Served  map[protocol.NodeID]bool
	Clients int // it closes once it served them all
	// Lease, the seeded bug: the lock is taken back when it runs out
	// (a timer keyed by the holder), without the holder knowing.
	Lease time.Duration
	// Leaks, for the checks of names the world cannot rename: the holder
	// kept in a plain string, or written in the grant's free text.
	Plain     string
	KeepPlain bool
	NotePlain bool
}

func newLockServer() *lockServer { return &lockServer{Served: map[protocol.NodeID]bool{}, Clients: 3} }

// Enabled: the server closes once it served every client.
func (s *lockServer) Enabled(mutexpb.ServerEvent) bool { return len(s.Served) == s.Clients }

func (s *lockServer) Start(env mutexpb.ServerEnv, saved mutexpb.Message) error {
	if h, ok := saved.(*mutexpb.Held); ok {
		s.Holder, s.Queue = h.Holder, h.Queue
	}
	return nil
}

func (s *lockServer) OnAcquired(env mutexpb.ServerEnv, from protocol.NodeID, m *mutexpb.Acquire) error {
	if s.Holder == "" {
		s.grant(env, from)
	} else {
		s.Queue = append(s.Queue, from)
	}
	env.Save(&mutexpb.Held{Holder: s.Holder, Queue: s.Queue})
	return nil
}

func (s *lockServer) grant(env mutexpb.ServerEnv, who protocol.NodeID) {
	s.Holder = who
	g := &mutexpb.Grant{Holder: who}
	if s.KeepPlain {
		s.Plain = string(who)
	}
	if s.NotePlain {
		g.Note = "granted to " + string(who) // inside a longer string: not seen
		if who == "c2" {
			g.Note = string(who)
		}
	}
	env.Send(who, g)
	if s.Lease > 0 {
		env.SetExpireTimer(s.Lease, who)
	}
}

func (s *lockServer) OnReleased(env mutexpb.ServerEnv, from protocol.NodeID, m *mutexpb.Release) error {
	if from != s.Holder {
		return protocol.ErrSkip // its lease ran out
	}
	env.CancelExpireTimer(from)
	return s.next(env)
}

func (s *lockServer) OnExpire(env mutexpb.ServerEnv, who protocol.NodeID) error {
	if who != s.Holder {
		return protocol.ErrSkip
	}
	return s.next(env)
}

func (s *lockServer) next(env mutexpb.ServerEnv) error {
	s.Served[s.Holder] = true
	s.Holder = ""
	if len(s.Queue) > 0 {
		who := s.Queue[0]
		s.Queue = s.Queue[1:]
		s.grant(env, who)
	}
	env.Save(&mutexpb.Held{Holder: s.Holder, Queue: s.Queue})
	return nil
}

func (s *lockServer) OnClose(mutexpb.ServerEnv) error { return nil }

// lockClient takes the lock once.
type lockClient struct{ Server protocol.NodeID }

func (c *lockClient) OnAsk(env mutexpb.ClientEnv) error {
	env.Send(c.Server, &mutexpb.Acquire{})
	return nil
}

func (c *lockClient) OnGranted(env mutexpb.ClientEnv, from protocol.NodeID, m *mutexpb.Grant) error {
	if m.Holder != env.Self() {
		return errors.New("granted to another")
	}
	return nil
}

func (c *lockClient) OnGive(env mutexpb.ClientEnv) error {
	env.Send(c.Server, &mutexpb.Release{})
	return nil
}

func clientNames(n int) []protocol.NodeID {
	out := make([]protocol.NodeID, n)
	for i := range out {
		out[i] = protocol.NodeID(fmt.Sprintf("c%d", i+1))
	}
	return out
}

// mutexWorld is server s and n clients, declared interchangeable.
func mutexWorld(n int, net world.Network, server func() *lockServer) world.Config {
	nodes := []world.Node{{Name: "s", Role: mutexpb.ServerRole(func() mutexpb.ServerHandler { s := server(); s.Clients = n; return s })}}
	for _, c := range clientNames(n) {
		nodes = append(nodes, world.Node{Name: c, Role: mutexpb.ClientRole(func() mutexpb.ClientHandler { return &lockClient{Server: "s"} })})
	}
	return world.Config{
		Network:    net,
		Nodes:      nodes,
		Symmetric:  [][]protocol.NodeID{clientNames(n)},
		Invariants: []world.Check{{Name: mutexpb.InvariantMutex, Check: mutualExclusion}},
	}
}

func mutualExclusion(w *world.World) error {
	var holders []string
	for _, n := range w.Nodes()[1:] {
		if mutexpb.ClientState(n.State) == mutexpb.ClientHolding {
			holders = append(holders, string(n.Name))
		}
	}
	if len(holders) > 1 {
		return fmt.Errorf("%s hold the lock", strings.Join(holders, " and "))
	}
	return nil
}

// TestSymmetryKeepsTheVerdicts: with the clients declared interchangeable
// (names in grants, saved records, timers' keys, the server's queue and
// map keys all renamed), the search meets fewer states and gives the same
// verdict as without: the same schedules counted exactly when it passes,
// a failing schedule as short when it fails, which replays.
func TestSymmetryKeepsTheVerdicts(t *testing.T) {
	lease := func() *lockServer { s := newLockServer(); s.Lease = time.Second; return s }
	for _, c := range []struct {
		name    string
		clients int
		net     world.Network
		server  func() *lockServer
		crashes int
		fails   string
	}{
		{name: "3 clients", clients: 3, server: newLockServer},
		{name: "3 clients, fifo", clients: 3, net: world.Network{Order: world.FIFO}, server: newLockServer},
		{name: "4 clients", clients: 4, server: newLockServer},
		// A duplicated Acquire queues its client twice: the others wait forever.
		{name: "3 clients, a duplicate", clients: 3, net: world.Network{Duplicates: 1}, server: newLockServer, fails: world.InvariantHot},
		{name: "lease taken back", clients: 3, server: lease, fails: mutexpb.InvariantMutex},
		{name: "server crashes", clients: 3, server: newLockServer, crashes: 1, fails: world.InvariantHot},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := mutexWorld(c.clients, c.net, c.server)
			cfg.Nodes[0].Crashes = c.crashes
			for _, workers := range []int{1, 2} {
				sym, start := explored(t, cfg, explore.Options{Workers: workers})
				full, _ := explored(t, cfg, explore.Options{Workers: workers, NoSymmetry: true, NoSleepSets: true})
				perms := 1
				for k := 2; k <= c.clients; k++ {
					perms *= k
				}
				if sym.Renamings != perms || full.Renamings != 0 {
					t.Fatalf("%d and %d renamings", sym.Renamings, full.Renamings)
				}
				if c.fails == "" {
					if !sym.Passed() || !full.Passed() {
						t.Fatalf("symmetry %v, without %v", sym.Violation, full.Violation)
					}
					if sym.Schedules != full.Schedules || sym.Cyclic || sym.States >= full.States {
						t.Fatalf("%d states %g schedules under symmetry, %d and %g without", sym.States, sym.Schedules, full.States, full.Schedules)
					}
					t.Logf("workers %d: %d states under symmetry, %d without, %g schedules", workers, sym.States, full.States, sym.Schedules)
					continue
				}
				if sym.Passed() || full.Passed() || sym.Violation.Invariant != c.fails || full.Violation.Invariant != c.fails {
					t.Fatalf("symmetry %v, without %v, want %s", sym.Violation, full.Violation, c.fails)
				}
				if !sym.Shortest || !full.Shortest || len(sym.Schedule) != len(full.Schedule) {
					t.Fatalf("%d steps under symmetry (shortest %v), %d without (%v)", len(sym.Schedule), sym.Shortest, len(full.Schedule), full.Shortest)
				}
				again := explore.Replay(start, sym.Schedule)
				if again.Violation == nil || again.Violation.Error() != sym.Violation.Error() {
					t.Fatalf("replay: %v, want %v", again.Violation, sym.Violation)
				}
				t.Logf("workers %d: %s in %d steps:\n%s", workers, sym.Violation, len(sym.Schedule), strings.Join(sym.Trace, "\n"))
			}
		})
	}
}

// TestSymmetryRefused: a declaration the world cannot honour is refused by
// Start, with ErrConfig and explore.ErrRefused, and says why.
func TestSymmetryRefused(t *testing.T) {
	for _, c := range []struct {
		name   string
		change func(cfg *world.Config)
		says   string
	}{
		{"different machines", func(cfg *world.Config) { cfg.Symmetric = [][]protocol.NodeID{{"c1", "s"}} }, "node s machine Server"},
		{"unknown node", func(cfg *world.Config) { cfg.Symmetric = [][]protocol.NodeID{{"c1", "c9"}} }, "c9, which is no node"},
		{"twice", func(cfg *world.Config) { cfg.Symmetric = [][]protocol.NodeID{{"c1", "c2"}, {"c3", "c1"}} }, "in symmetric groups"},
		{"empty group", func(cfg *world.Config) { cfg.Symmetric = [][]protocol.NodeID{{}} }, "names no node"},
		{"crash budgets", func(cfg *world.Config) { cfg.Nodes[2].Crashes = 1 }, "may crash 0 times, node c2 1"},
		{"one client unlike the others", func(cfg *world.Config) {
			cfg.Nodes[3].Role = mutexpb.ClientRole(func() mutexpb.ClientHandler { return &lockClient{Server: "c1"} })
		}, "node c3 starts as &{Server:c1}, which swapping c1 and c2 makes &{Server:c2}: it tells them apart"},
		{"a server naming one client", func(cfg *world.Config) {
			cfg.Nodes[0].Role = mutexpb.ServerRole(func() mutexpb.ServerHandler { s := newLockServer(); s.Queue = []protocol.NodeID{"c1"}; return s })
		}, "node s starts as"},
		{"a server naming them in a slice", func(cfg *world.Config) {
			cfg.Nodes[0].Role = mutexpb.ServerRole(func() mutexpb.ServerHandler { s := newLockServer(); s.Queue = clientNames(3); return s })
		}, "hold them in a set, not a slice"},
		{"a plain name as it starts", func(cfg *world.Config) {
			cfg.Nodes[0].Role = mutexpb.ServerRole(func() mutexpb.ServerHandler { s := newLockServer(); s.Plain = "c2"; return s })
		}, `holds "c2": a name the world renames, in a plain string, at (*value).Plain`},
	} {
		cfg := mutexWorld(3, world.Network{}, newLockServer)
		c.change(&cfg)
		_, err := world.Start(cfg)
		if !errors.Is(err, world.ErrConfig) || !errors.Is(err, explore.ErrRefused) || !strings.Contains(fmt.Sprint(err), c.says) {
			t.Errorf("%s: %v, want a refusal saying %q", c.name, err, c.says)
		}
	}
	// The same world without the declaration starts.
	cfg := mutexWorld(3, world.Network{}, newLockServer)
	cfg.Nodes[0].Role = mutexpb.ServerRole(func() mutexpb.ServerHandler { s := newLockServer(); s.Queue = clientNames(3); return s })
	cfg.Symmetric = nil
	if _, err := world.Start(cfg); err != nil {
		t.Errorf("without symmetry: %v", err)
	}
}

// TestPlainNamesAreViolations: a name of a group's node kept in a plain
// string, which no renaming reaches, is a violation wherever it is met,
// with or without the symmetry in use; without the declaration, nothing.
func TestPlainNamesAreViolations(t *testing.T) {
	for _, c := range []struct {
		name   string
		server func() *lockServer
		says   string
	}{
		{"in a handler", func() *lockServer { s := newLockServer(); s.KeepPlain = true; return s }, `its handler holds "c`},
		{"in a message", func() *lockServer { s := newLockServer(); s.NotePlain = true; return s }, `a message it sent holds "c2": a name the world renames, in a plain string, at (*value).Note`},
	} {
		cfg := mutexWorld(3, world.Network{}, c.server)
		for _, no := range []bool{false, true} {
			r, start := explored(t, cfg, explore.Options{NoSymmetry: no})
			if r.Passed() || r.Violation.Invariant != world.InvariantSymmetry || !strings.Contains(r.Violation.Detail, c.says) {
				t.Fatalf("%s, no symmetry %v: %v, want a symmetry violation saying %q", c.name, no, r.Violation, c.says)
			}
			if again := explore.Replay(start, r.Schedule); again.Violation == nil || again.Violation.Error() != r.Violation.Error() {
				t.Fatalf("%s: replay %v", c.name, again.Violation)
			}
		}
		cfg.Symmetric = nil
		if r, _ := explored(t, cfg, explore.Options{}); !r.Passed() {
			t.Fatalf("%s, undeclared: %v", c.name, r.Violation)
		}
	}
}

// TestRenamedStatesAreReachable: every state the world reaches, renamed by
// swapping two clients, is a state it reaches too, encoded as the world
// encodes that one: the renaming misses no name (in a handler, a queue, a
// map's keys, a message's fields, a saved record, a timer's key), and
// renames nothing that is no name. Every renaming is made of such swaps.
func TestRenamedStatesAreReachable(t *testing.T) {
	lease := func() *lockServer { s := newLockServer(); s.Lease = time.Second; return s }
	for _, c := range []struct {
		name    string
		net     world.Network
		server  func() *lockServer
		crashes int
	}{
		{"plain", world.Network{}, newLockServer, 0},
		{"fifo, a loss, a duplicate", world.Network{Order: world.FIFO, Loss: 1, Duplicates: 1}, newLockServer, 0},
		{"server crashes", world.Network{}, newLockServer, 1},
		{"leases", world.Network{MaxDelay: time.Second}, lease, 1},
	} {
		cfg := mutexWorld(3, c.net, c.server)
		cfg.Nodes[0].Crashes = c.crashes
		start, err := world.Start(cfg)
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		var states []*world.World
		add := func(w *world.World) {
			if k := string(w.AppendState(nil)); !seen[k] {
				seen[k] = true
				states = append(states, w)
			}
		}
		add(start())
		for i := 0; i < len(states); i++ {
			if states[i].Violation() != nil {
				continue
			}
			for _, ch := range states[i].Choices() {
				next := states[i].Clone()
				next.Step(ch)
				add(next)
			}
			if len(states) > 200000 {
				t.Fatalf("%s: too many states", c.name)
			}
		}
		names := clientNames(3)
		for _, w := range states {
			for a := range names {
				for b := a + 1; b < len(names); b++ {
					if k := world.AppendSwapped(w, nil, names[a], names[b]); !seen[string(k)] {
						t.Fatalf("%s: a state swapping %s and %s makes is none the world reaches:\n%q\nof\n%q", c.name, names[a], names[b], k, w.AppendState(nil))
					}
				}
			}
		}
		t.Logf("%s: %d states, each renamed into one", c.name, len(states))
	}
}
