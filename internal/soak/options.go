// Package soak is rrefgen soak: a soak and chaos harness for the runtime.
// It starts a group of member processes (this executable again, in a child
// mode selected by an environment variable), has them run random traffic
// at one another (Call, Go, Remote and ToHere, NewRRef, RRefs passed to a
// third member, returned, forwarded along chains, cloned, held and
// released), checks every result against the value it must have, and
// meanwhile stops, kills and cuts members from the parent. It runs in
// rounds: a killed member is fenced for good, so each round forms a fresh
// group, runs, shuts it down with worker.Shutdown and counts what went
// wrong.
package soak

import (
	"errors"
	"flag"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/rrefkit/rref/fifo"
)

// Transports a group can run over.
const (
	TransportTCP   = "tcp"
	TransportSHM   = "shm"
	TransportMixed = "mixed" // the first members tcp, the others one shm group
)

// Fault kinds the parent injects.
const (
	FaultStop  = "stop"  // SIGSTOP a member, SIGCONT it later: must fail nothing
	FaultKill  = "kill"  // SIGKILL a member: only calls that involve it may fail
	FaultReset = "reset" // reset one tcp connection between two members (in the relay)
	FaultStall = "stall" // stall one tcp link for MinStop-MaxStop (in the relay): must fail nothing
	// FaultPause stops a member for MinPause-MaxPause times DeadAfter: past
	// it, so the member may be fenced. It must be fenced by the whole group
	// or by none (one verdict on death), only operations that involve it
	// may fail, and only if it was fenced; nothing may leak either way.
	// Not a default: it needs rounds several DeadAfters long (-dead-after).
	FaultPause = "pause"
)

var allFaults = []string{FaultStop, FaultKill, FaultReset, FaultStall, FaultPause}

// A pause lasts MinPause to MaxPause times DeadAfter: far enough past it
// that a heartbeat surely missed it, and short enough that a member no
// link took for dead still has its calls answered within the operation
// deadline.
const (
	MinPause = 1.5
	MaxPause = 2.0
	// pauseRoundShare: a round's traffic holds the longest pause and as
	// long again after it (the group's verdict, then traffic without it).
	pauseRoundShare = 2 * MaxPause
)

// tcpFaults need a tcp link between members.
var tcpFaults = []string{FaultReset, FaultStall}

// Injections a test (or a suspicious operator) can ask members for, to
// prove the harness sees each kind of failure. "" injects nothing.
const (
	InjectWrong = "wrong" // each member's first served add returns a wrong sum
	InjectFail  = "fail"  // each member's first served add returns an error
	InjectHang  = "hang"  // each member's first served add takes Options.HangFor
	InjectLeak  = "leak"  // each member keeps one RRef of its own past Shutdown
	// InjectWrongUnhold: each member's first served unhold answers a value
	// other than the one it held (the check of what a holder releases).
	InjectWrongUnhold = "wrong-unhold"
)

var allInjections = []string{InjectWrong, InjectFail, InjectHang, InjectLeak, InjectWrongUnhold}

// Bounds and defaults, each with its reason.
const (
	// MinMembers: a call that passes an RRef to a third member needs three.
	MinMembers = 3
	// MaxMembers: each member runs several clients; beyond 8 processes a
	// 2-core host spends the round descheduling them, and the -race
	// children it tests with are 5-10x heavier still.
	MaxMembers     = 8
	DefaultMembers = 4 // a kill still leaves three: a caller, an owner and a third member

	DefaultDuration = time.Minute
	// DefaultRoundTraffic is long enough for the longest stop (3 s) to sit
	// well inside a round, with traffic before and after it.
	DefaultRoundTraffic = 10 * time.Second
	// MinRoundTraffic: below it a round is all start-up and shutdown.
	MinRoundTraffic = time.Second
	// DefaultClients per member: enough for a member to be caller, callee
	// and owner at once, few enough that 8 members share 2 cores.
	DefaultClients = 3
	MaxClients     = 64

	// DefaultOpDeadline bounds one operation (a Call and everything it
	// sets off): well above the longest stop (3 s), several of which may
	// delay one nested operation, and above fifo's DeadAfter (10 s), so a
	// peer that is dead but silent is declared so before its callers give
	// up. An operation past it counts as hung.
	DefaultOpDeadline = 30 * time.Second
	// MinOpDeadline: a pause of MaxStop must fit in a deadline with room
	// (only checked when stops are injected).
	MinOpDeadline = 2 * time.Second
	// DefaultShutdownTimeout bounds worker.Shutdown's barrier: it settles
	// in milliseconds once traffic stops; a shutdown still running at the
	// timeout returns a LeakError.
	DefaultShutdownTimeout = 20 * time.Second
	// DefaultStartTimeout bounds worker.Start: processes start in any
	// order and dial with retries; on a loaded host a race-enabled child
	// takes a second or two to start.
	DefaultStartTimeout = 30 * time.Second

	// MinStop and MaxStop bound a stop: the brief's 0.2-3 s, short of the
	// 10 s DeadAfter a pause must stay under.
	MinStop = 200 * time.Millisecond
	MaxStop = 3 * time.Second
)

// DefaultFaults are every fault: a reset tcp link is dialed again and
// resumes, and a stalled one waits, so neither may fail anything. Over
// -transport shm, which has no tcp link, the default leaves them out
// (defaultFaults).
var DefaultFaults = []string{FaultStop, FaultKill, FaultReset, FaultStall}

// defaultFaults are the faults a transport takes when none are chosen.
func defaultFaults(transport string) []string {
	if transport == TransportSHM {
		return slices.DeleteFunc(slices.Clone(DefaultFaults), func(f string) bool { return slices.Contains(tcpFaults, f) })
	}
	return slices.Clone(DefaultFaults)
}

// Options configure a soak run. Zero fields take their defaults
// (withDefaults); Validate reports what is out of range.
type Options struct {
	Members   int
	Transport string
	Faults    []string
	// Duration is the run's length; Rounds > 0 runs exactly that many
	// rounds instead.
	Duration time.Duration
	Rounds   int
	// FirstRound numbers the first round (default 1): a round's plan and
	// values depend only on the seed and its number, so -from K -rounds 1
	// replays round K of a longer run.
	FirstRound   int
	RoundTraffic time.Duration // traffic time per round
	Seed         uint64        // 0: chosen at random (and printed)
	Clients      int           // traffic goroutines per member

	OpDeadline      time.Duration
	ShutdownTimeout time.Duration
	StartTimeout    time.Duration
	// DeadAfter is the members' fifo.Config.DeadAfter (0: fifo's default,
	// 10 s): how long a silent peer lives. Pause faults last a multiple of it.
	DeadAfter time.Duration

	// Inject asks members to misbehave once (see InjectWrong...).
	Inject  string
	HangFor time.Duration // InjectHang's delay (default 2 OpDeadline)

	// Command starts a member: this executable and the arguments that
	// reach ServeMember (the CLI: "soak"; a test binary: "-test.run=^$").
	// Default: os.Executable() with "soak".
	Command []string

	// Progress, when set, receives one line per round and per problem.
	Progress func(string)
}

func (o Options) withDefaults() Options {
	if o.Members == 0 {
		o.Members = DefaultMembers
	}
	if o.Transport == "" {
		o.Transport = TransportTCP
	}
	if o.Faults == nil {
		o.Faults = defaultFaults(o.Transport)
	}
	if o.Duration == 0 {
		o.Duration = DefaultDuration
	}
	if o.RoundTraffic == 0 {
		o.RoundTraffic = DefaultRoundTraffic
	}
	if o.Clients == 0 {
		o.Clients = DefaultClients
	}
	if o.OpDeadline == 0 {
		o.OpDeadline = DefaultOpDeadline
	}
	if o.ShutdownTimeout == 0 {
		o.ShutdownTimeout = DefaultShutdownTimeout
	}
	if o.StartTimeout == 0 {
		o.StartTimeout = DefaultStartTimeout
	}
	if o.HangFor == 0 {
		o.HangFor = 2 * o.OpDeadline
	}
	if o.DeadAfter == 0 {
		o.DeadAfter = fifo.DefaultDeadAfter
	}
	if o.Progress == nil {
		o.Progress = func(string) {}
	}
	return o
}

// ErrUsage is matched by every error Validate and the flags report.
var ErrUsage = errors.New("soak: usage error")

type usageError struct{ msg string }

func (e *usageError) Error() string        { return "soak: " + e.msg }
func (e *usageError) Is(target error) bool { return target == ErrUsage }

func usageErr(format string, args ...any) error {
	return &usageError{fmt.Sprintf(format, args...)}
}

// Validate reports options out of range (defaults applied first).
func (o Options) Validate() error {
	o = o.withDefaults()
	switch {
	case o.Members < MinMembers || o.Members > MaxMembers:
		return usageErr("-n must be from %d to %d, not %d", MinMembers, MaxMembers, o.Members)
	case o.Transport != TransportTCP && o.Transport != TransportSHM && o.Transport != TransportMixed:
		return usageErr("-transport must be tcp, shm or mixed, not %q", o.Transport)
	case o.Duration < 0:
		return usageErr("-d must be positive, not %v", o.Duration)
	case o.FirstRound < 0:
		return usageErr("-from must not be negative, not %d", o.FirstRound)
	case o.Rounds < 0:
		return usageErr("-rounds must not be negative, not %d", o.Rounds)
	case o.RoundTraffic < MinRoundTraffic:
		return usageErr("-round must be at least %v, not %v", MinRoundTraffic, o.RoundTraffic)
	case o.Clients < 1 || o.Clients > MaxClients:
		return usageErr("-clients must be from 1 to %d, not %d", MaxClients, o.Clients)
	case o.OpDeadline <= 0 || o.ShutdownTimeout <= 0 || o.StartTimeout <= 0:
		return usageErr("deadlines and timeouts must be positive")
	}
	for _, f := range o.Faults {
		if !slices.Contains(allFaults, f) {
			return usageErr("unknown fault %q (faults: %s)", f, strings.Join(allFaults, ", "))
		}
	}
	for _, f := range tcpFaults {
		if slices.Contains(o.Faults, f) && o.Transport == TransportSHM {
			return usageErr("-faults %s acts on tcp links; -transport shm has none (use tcp or mixed)", f)
		}
	}
	if slices.Contains(o.Faults, FaultStop) && o.OpDeadline < MinOpDeadline {
		return usageErr("-deadline must be at least %v with stop faults: a stopped peer delays calls", MinOpDeadline)
	}
	if o.DeadAfter < 0 {
		return usageErr("-dead-after must be positive, not %v", o.DeadAfter)
	}
	if (slices.Contains(o.Faults, FaultStop) || slices.Contains(o.Faults, FaultStall)) && o.DeadAfter/stopUnderDeadAfter < MinStop {
		return usageErr("-dead-after must be at least %v with stop or stall faults: they last from %v to half of it, and must fail nothing", stopUnderDeadAfter*MinStop, MinStop)
	}
	if slices.Contains(o.Faults, FaultPause) {
		if need := time.Duration(pauseRoundShare * float64(o.DeadAfter)); o.RoundTraffic < need {
			return usageErr("pause faults last up to %vx -dead-after (%v): -round must be at least %v (try -dead-after %v)", MaxPause, o.DeadAfter, need, time.Duration(float64(o.RoundTraffic)/pauseRoundShare).Round(time.Millisecond))
		}
		if need := time.Duration((MaxPause + 1) * float64(o.DeadAfter)); o.OpDeadline < need {
			return usageErr("-deadline must be at least %v with pause faults: a paused member no link took for dead delays calls by up to %vx -dead-after", need, MaxPause)
		}
	}
	if o.Inject != "" && !slices.Contains(allInjections, o.Inject) {
		return usageErr("unknown injection %q (injections: %s)", o.Inject, strings.Join(allInjections, ", "))
	}
	if o.Command != nil && len(o.Command) == 0 {
		return usageErr("an empty member command")
	}
	return nil
}

// ParseFaults parses -faults: a comma-separated list of stop, kill, reset
// and stall, or "none".
func ParseFaults(s string) ([]string, error) {
	s = strings.TrimSpace(s)
	if s == "none" || s == "" {
		return []string{}, nil
	}
	var out []string
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if !slices.Contains(allFaults, f) {
			return nil, usageErr("unknown fault %q in -faults %q (faults: %s, or none)", f, s, strings.Join(allFaults, ", "))
		}
		if !slices.Contains(out, f) {
			out = append(out, f)
		}
	}
	return out, nil
}

// Flags are the command line's settings beside Options.
type Flags struct {
	Options
	JSON    bool
	Verbose bool
}

// BindFlags defines the soak command's flags on fs and returns a function
// that, once fs is parsed, checks them and builds the Options. Bad values
// come back as errors matching ErrUsage, never as panics.
func BindFlags(fs *flag.FlagSet) func() (Flags, error) {
	n := fs.Int("n", DefaultMembers, fmt.Sprintf("members per group (%d to %d)", MinMembers, MaxMembers))
	transport := fs.String("transport", TransportTCP, "tcp, shm or mixed (the first members tcp, the others shm)")
	faults := fs.String("faults", strings.Join(DefaultFaults, ","), "faults to inject: stop, kill, reset, stall, pause (comma-separated), or none; reset and stall are left out of the default over shm, pause out of every default")
	d := fs.Duration("d", DefaultDuration, "how long to run (rounds keep starting until then)")
	rounds := fs.Int("rounds", 0, "run exactly this many rounds instead of for -d")
	from := fs.Int("from", 1, "number of the first round (with -seed, -from K -rounds 1 replays round K)")
	round := fs.Duration("round", DefaultRoundTraffic, "traffic time per round")
	seed := fs.Uint64("seed", 0, "seed of the traffic's values and the fault schedule (0: pick one and print it)")
	clients := fs.Int("clients", DefaultClients, "traffic goroutines per member")
	deadline := fs.Duration("deadline", DefaultOpDeadline, "deadline of each operation; one past it counts as hung")
	deadAfter := fs.Duration("dead-after", fifo.DefaultDeadAfter, "the members' DeadAfter: a peer silent this long is dead (pause faults last 1.5-2x it)")
	jsonOut := fs.Bool("json", false, "print the report as JSON")
	verbose := fs.Bool("v", false, "print each round and each problem to stderr as it happens")
	return func() (Flags, error) {
		if fs.NArg() > 0 {
			return Flags{}, usageErr("unexpected arguments %q", fs.Args())
		}
		fl, err := ParseFaults(*faults)
		if err != nil {
			return Flags{}, err
		}
		chosen := false
		fs.Visit(func(f *flag.Flag) { chosen = chosen || f.Name == "faults" })
		if !chosen {
			fl = defaultFaults(*transport)
		}
		// Zero Options fields mean "default"; on the command line a zero
		// is a mistake, so these are checked before Validate sees them.
		switch {
		case *d <= 0:
			return Flags{}, usageErr("-d must be positive, not %v", *d)
		case *n < MinMembers || *n > MaxMembers:
			return Flags{}, usageErr("-n must be from %d to %d, not %d", MinMembers, MaxMembers, *n)
		case *clients < 1 || *clients > MaxClients:
			return Flags{}, usageErr("-clients must be from 1 to %d, not %d", MaxClients, *clients)
		case *round < MinRoundTraffic:
			return Flags{}, usageErr("-round must be at least %v, not %v", MinRoundTraffic, *round)
		case *from < 1:
			return Flags{}, usageErr("-from must be at least 1, not %d", *from)
		case *deadline <= 0:
			return Flags{}, usageErr("-deadline must be positive, not %v", *deadline)
		case *deadAfter <= 0:
			return Flags{}, usageErr("-dead-after must be positive, not %v", *deadAfter)
		}
		o := Options{Members: *n, Transport: *transport, Faults: fl, Duration: *d, Rounds: *rounds, FirstRound: *from,
			RoundTraffic: *round, Seed: *seed, Clients: *clients, OpDeadline: *deadline, DeadAfter: *deadAfter}
		if err := o.Validate(); err != nil {
			return Flags{}, err
		}
		return Flags{Options: o, JSON: *jsonOut, Verbose: *verbose}, nil
	}
}
