package soak

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rrefkit/rref/fifo"
	"github.com/rrefkit/rref/runtime/worker"
)

// Member exit statuses.
const (
	exitMemberOK       = 0
	exitMemberFailed   = 1 // a protocol error with the parent, or Start failed
	exitMemberOrphaned = 3 // the parent went away (standard input closed)
)

// statsInterval is how often a member sends its counts: what a killed
// member did since its last snapshot is lost to the totals, and a quarter
// second of it is a rounding error.
const statsInterval = 250 * time.Millisecond

// IsMember reports whether this process was started as a soak member.
func IsMember() bool { return os.Getenv(memberEnv) != "" }

// ServeMember runs this process as one member of a soak round, driven by
// the parent over standard input and output, and returns its exit status.
// Call it first thing when IsMember (the CLI's soak command and the
// package's TestMain do).
func ServeMember() int {
	return serveMember(os.Stdin, os.Stdout, os.Stderr)
}

// member is one member process's state.
type member struct {
	cfg   memberConfig
	w     *worker.Worker
	out   *json.Encoder
	outMu sync.Mutex
	prims primCounts
	held  holds

	dead      atomic.Uint64 // bit i: member i was killed, or this worker took it for dead
	heardDead atomic.Bool
	fenced    atomic.Bool // the group fenced this member: its worker closed
	injected  atomic.Bool
	leaked    *worker.RRef[uint64] // InjectLeak's reference, never released

	statsMu      sync.Mutex
	ok, started  map[string]uint64
	okAfterDeath uint64
}

func (m *member) isDead(i int) bool { return m.dead.Load()&(1<<uint(i)) != 0 }

// anyPeerAlive reports whether some other member is neither killed nor
// taken for dead by this one.
func (m *member) anyPeerAlive() bool {
	for i := range m.cfg.Names {
		if i != m.cfg.Self && !m.isDead(i) {
			return true
		}
	}
	return false
}

func (m *member) send(e event) {
	m.outMu.Lock()
	defer m.outMu.Unlock()
	// A failed write means the parent is gone: standard input's closing
	// ends this process.
	m.out.Encode(e)
}

func (m *member) stats() *memberStats {
	m.statsMu.Lock()
	s := &memberStats{OK: map[string]uint64{}, Started: map[string]uint64{}, OKAfterDeath: m.okAfterDeath}
	for k, v := range m.ok {
		s.OK[k] = v
	}
	for k, v := range m.started {
		s.Started[k] = v
	}
	m.statsMu.Unlock()
	s.Calls = m.prims.snapshot()
	s.Goroutines = runtime.NumGoroutine()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	s.HeapBytes = ms.HeapInuse
	if m.w != nil {
		s.MessagesSent = m.w.DebugInfo().MessagesSent
	}
	return s
}

func serveMember(stdin io.Reader, stdout, stderr io.Writer) int {
	var finished atomic.Bool // done was sent: the parent may close standard input now
	cmds := make(chan command, 16)
	go func() {
		sc := bufio.NewScanner(stdin)
		sc.Buffer(make([]byte, 64<<10), 1<<20) // a config line holds up to 8 peers: far below 1 MiB
		for sc.Scan() {
			var c command
			if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
				fmt.Fprintf(stderr, "soak member: a bad command %q: %v\n", sc.Text(), err)
				os.Exit(exitMemberFailed)
			}
			cmds <- c
		}
		// The parent is done with us, or dead: a member never outlives it.
		if finished.Load() {
			os.Exit(exitMemberOK)
		}
		os.Exit(exitMemberOrphaned)
	}()
	m := &member{out: json.NewEncoder(stdout), prims: newPrimCounts(), held: holds{m: map[uint64]heldRef{}},
		ok: map[string]uint64{}, started: map[string]uint64{}}
	first := <-cmds
	if first.Cmd != cmdConfig || first.Config == nil {
		fmt.Fprintf(stderr, "soak member: expected a config, got %q\n", first.Cmd)
		return exitMemberFailed
	}
	m.cfg = *first.Config
	self := m.cfg.Names[m.cfg.Self]
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn})).With("member", self)
	ctx, cancel := context.WithTimeout(context.Background(), m.cfg.StartTimeout)
	wcfg := worker.Config{Logger: log, Setup: m.setup, FIFO: fifo.Config{DeadAfter: m.cfg.DeadAfter},
		OnPeerFailed: func(peer string, _ error) {
			i := slices.Index(m.cfg.Names, peer)
			m.dead.Or(1 << uint(i)) // stop choosing it: the worker has reclaimed it
			m.heardDead.Store(true)
			m.send(event{Ev: evPeerDead, Member: i})
		},
		OnFenced: func(err error) {
			m.fenced.Store(true)
			m.send(event{Ev: evFenced, Err: err.Error()})
		}}
	w, err := worker.Start(ctx, self, m.cfg.Peers, m.cfg.Secret, wcfg)
	cancel()
	if err != nil {
		m.send(event{Ev: evStartFail, Err: err.Error()})
		return exitMemberFailed
	}
	m.w = w
	m.send(event{Ev: evUp, Stats: m.stats()})

	var stop atomic.Bool
	var clients sync.WaitGroup
	tick := time.NewTicker(statsInterval)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
			m.send(event{Ev: evStats, Stats: m.stats()})
			continue
		case c := <-cmds:
			switch c.Cmd {
			case cmdGo:
				if m.cfg.Inject == InjectLeak {
					m.leaked, _ = worker.NewRRef(w, uint64(m.cfg.Self))
				}
				for i := range m.cfg.Clients {
					clients.Add(1)
					go func() {
						defer clients.Done()
						(&client{m: m, id: i}).loop(&stop)
					}()
				}
			case cmdDead:
				m.dead.Or(1 << uint(c.Member))
				m.heardDead.Store(true)
			case cmdStop:
				stop.Store(true)
				clients.Wait()
				m.send(event{Ev: evQuiet, Stats: m.stats()})
			case cmdFinish:
				d := m.finish()
				finished.Store(true)
				m.send(event{Ev: evDone, Done: d})
				return exitMemberOK
			default:
				fmt.Fprintf(stderr, "soak member: unknown command %q\n", c.Cmd)
				return exitMemberFailed
			}
		}
	}
}

// finish drops what this member still holds for others and shuts down.
func (m *member) finish() *doneInfo {
	d := &doneInfo{Fenced: m.fenced.Load()}
	m.held.mu.Lock()
	for k, h := range m.held.m {
		if m.isDead(h.placer) {
			d.HeldForDead++
		} else {
			d.HeldForLive++
		}
		h.ref.Release()
		delete(m.held.m, k)
	}
	m.held.mu.Unlock()
	info := m.w.DebugInfo()
	d.Illegal, d.BadInput = info.Illegal, info.BadInput
	if d.Fenced {
		// Closed by the group's verdict: its peers reclaimed its
		// references, and no barrier can run with them.
		d.MessagesSent = info.MessagesSent
		return d
	}
	ctx, cancel := context.WithTimeout(context.Background(), m.cfg.ShutdownTimeout)
	defer cancel()
	err := m.w.Shutdown(ctx)
	d.MessagesSent = m.w.DebugInfo().MessagesSent
	var le *worker.LeakError
	switch {
	case errors.As(err, &le):
		d.Leak = err.Error()
		d.Records = len(le.Held)
		d.Unsettled = d.Records == 0
	case err != nil:
		d.Err = err.Error()
	}
	return d
}

// client is one traffic goroutine of a member.
type client struct {
	m        *member
	id       int
	holdings []holding
}

func (c *client) loop(stop *atomic.Bool) {
	m := c.m
	for k := uint64(0); !stop.Load(); k++ {
		if m.fenced.Load() {
			time.Sleep(statsInterval) // out of the group: nothing to do until the round ends
			continue
		}
		c.pruneDead()
		rng := rand.New(rand.NewPCG(m.cfg.Seed, opStream(m.cfg.Round, m.cfg.Self, c.id, k)))
		kind := pickOp(rng)
		if !c.do(k, kind, rng) {
			// Every peer is dead: nothing to do until the round ends.
			time.Sleep(statsInterval)
		}
	}
	// Each holding left with a live member is released, as an operation
	// like the others, so Shutdown finds nothing held.
	c.pruneDead()
	left := c.holdings
	for i, h := range left {
		if m.isDead(h.holder) {
			continue // reclaimed by this member, the owner
		}
		k := unholdOps + uint64(i)
		rng := rand.New(rand.NewPCG(m.cfg.Seed, opStream(m.cfg.Round, m.cfg.Self, c.id, k)))
		c.holdings = []holding{h} // the one opUnhold picks
		c.do(k, opUnhold, rng)
	}
	c.holdings = nil
}

// unholdOps numbers the end-of-round unhold operations apart from the
// traffic's own counters.
const unholdOps = 1 << 63

// pruneDead forgets holdings whose holder was killed: their references
// were reclaimed by this member, the owner.
func (c *client) pruneDead() {
	kept := c.holdings[:0]
	for _, h := range c.holdings {
		if !c.m.isDead(h.holder) {
			kept = append(kept, h)
		}
	}
	c.holdings = kept
}

// do runs one operation, counts it and reports a failure; it reports false
// when there was no live peer to run it with.
func (c *client) do(k uint64, kind string, rng *rand.Rand) bool {
	m := c.m
	o := &op{c: c, rng: rng}
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), m.cfg.OpDeadline)
	err := o.run(ctx, kind)
	expired := ctx.Err() != nil
	cancel()
	if errors.Is(err, errNoPeer) {
		return false
	}
	afterDeath := m.heardDead.Load()
	m.statsMu.Lock()
	m.started[kind]++
	if err == nil {
		m.ok[kind]++
		if afterDeath {
			m.okAfterDeath++
		}
	}
	m.statsMu.Unlock()
	if err == nil {
		return true
	}
	class := classify(err)
	if expired && class != classWrong {
		class = classHung // whatever the error says, the deadline passed
	}
	if m.fenced.Load() && class != classWrong && class != classHung {
		class = classPeer // this member was fenced: the parent checks it was
	}
	m.send(event{Ev: evFail, Fail: &failure{Round: m.cfg.Round, Member: m.cfg.Self, Client: c.id, Op: k, Kind: kind,
		Involved: o.involved, Start: start.UnixNano(), End: time.Now().UnixNano(), Class: class, Err: err.Error()}})
	return true
}
