package core_test

import (
	"encoding/binary"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rrefkit/rref/generated/rref"
	"github.com/rrefkit/rref/internal/scenario"
	"github.com/rrefkit/rref/runtime/core"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the expected output of script tests in testdata")

// A script test is etcd raft's interaction style: lines starting with "> " are
// commands, the lines after each are what the cores emitted and how their
// state changed. The network is explicit: nothing moves until "deliver".
// The commands new to crash are the scenario language's (conformance/
// README.md), parsed and run by its one interpreter (internal/scenario)
// against this harness as a target; the rest are the harness's own.
//
//	workers A B          declare workers (ids 1, 2, ...)
//	new W x V            W creates a local RRef x holding V
//	remote W O x V|fail  W calls remote(O, identity|fail, V); W holds x
//	pass W V x y         W passes x to V in a call; V's function binds y
//	return W V x y       V calls W, which returns x; V binds y on arrival
//	fetch W x            W fetches x
//	release W x          W drops x
//	timeout W x          W's remote that created x timed out
//	advance [W] N        the scenario language's tick: every live core's (or W's), N times
//	crash W              W dies; every other core is told at once
//	deliver [W V [Kind]] deliver the oldest in-flight message (from W to V, of Kind)
//	deliver-all          deliver oldest first until nothing is in flight
//	dup W V Kind         the network resends an in-flight message (a reconnect)
//	state [W]            dump the state of W (or of every live worker)
//	counters W           print W's debug counters
//	forge W V Kind f=v.. W sends V a message it made up (fields below)
//	tick W [N]           W's driver ticks N times (default 1)
//	flush W              W's timer fires for the RemoteRets it held back
//
// "workers A B +held-acks" makes cores that hold back RemoteRets
// (core.WithDeferredAcks): each one held back is printed, and stays held
// until its owner's "flush".
//
// Cores mint their ids from a fixed seed per worker (core.WithIDSeed). Ids
// are 64 random bits, so the output names the k-th id worker w minted w:k
// (as a counter would), and forge takes the same names; a local written
// #N is the raw number N, as an attacker guessing it would send. Forge
// fields: rref, fork, parent, child (ids), fetch (a number), refused and
// confirms (true/false), value (bytes).
type script struct {
	names    []string
	ids      map[string]core.WorkerID
	cores    []*core.Core
	dead     []bool
	net      []core.Envelope
	handles  map[string]core.HandleID // "W/x"
	returns  map[string]string        // "V/callID" -> y
	fetchFor map[string]string        // "W/fetchID" -> x
	out      []string
	alias    map[core.WorkerID]map[uint64]int // minted local -> k
	minted   map[core.WorkerID][]uint64       // k-1 -> minted local
	held     map[core.WorkerID][]core.RRefID  // RemoteRets held back, until flush
}

// scriptAliases is how many ids of each worker the output names w:k: far
// more than any script mints.
const scriptAliases = 256

// scriptSeed is worker id's id seed in script tests and the explorer.
func scriptSeed(id core.WorkerID) [32]byte {
	var seed [32]byte
	copy(seed[:], "rref script ids")
	binary.LittleEndian.PutUint32(seed[28:], uint32(id))
	return seed
}

// learnIDs records the first ids a core seeded like worker id's mints, by
// minting them on a core of its own.
func (s *script) learnIDs(id core.WorkerID) {
	c := core.New(id, core.WithIDSeed(scriptSeed(id)))
	s.alias[id] = map[uint64]int{}
	for k := 1; k <= scriptAliases; k++ {
		x := c.Handle(c.NewLocal(nil)).RRef.Local
		s.alias[id][x] = k
		s.minted[id] = append(s.minted[id], x)
	}
}

var (
	colonID  = regexp.MustCompile(`\b(\d+):(\d+)\b`)
	structID = regexp.MustCompile(`\{(\d+) (\d+)\}`)
)

// short renames the ids of script workers in line: a minted one w:k, any
// other (a forger's guess) w:#N.
func (s *script) short(line string) string {
	name := func(w, x string) (string, bool) {
		wi, err1 := strconv.ParseUint(w, 10, 32)
		xi, err2 := strconv.ParseUint(x, 10, 64)
		aliases, worker := s.alias[core.WorkerID(wi)]
		if err1 != nil || err2 != nil || !worker {
			return "", false
		}
		if k, ok := aliases[xi]; ok {
			return fmt.Sprintf("%s:%d", w, k), true
		}
		return fmt.Sprintf("%s:#%d", w, xi), true
	}
	line = colonID.ReplaceAllStringFunc(line, func(m string) string {
		p := colonID.FindStringSubmatch(m)
		if n, ok := name(p[1], p[2]); ok {
			return n
		}
		return m
	})
	return structID.ReplaceAllStringFunc(line, func(m string) string {
		p := structID.FindStringSubmatch(m)
		if n, ok := name(p[1], p[2]); ok {
			return "{" + n + "}"
		}
		return m
	})
}

// id parses w:k (the k-th id w minted) or w:#N (the raw local N).
func (s *script) id(v string) (core.WorkerID, uint64, error) {
	w, x, ok := strings.Cut(v, ":")
	wi, err := strconv.ParseUint(w, 10, 32)
	if !ok || err != nil {
		return 0, 0, fmt.Errorf("bad id %q", v)
	}
	if raw, isRaw := strings.CutPrefix(x, "#"); isRaw {
		n, err := strconv.ParseUint(raw, 10, 64)
		return core.WorkerID(wi), n, err
	}
	k, err := strconv.Atoi(x)
	if err != nil || k < 0 || k > len(s.minted[core.WorkerID(wi)]) {
		return 0, 0, fmt.Errorf("bad id %q", v)
	}
	if k == 0 {
		return core.WorkerID(wi), 0, nil
	}
	return core.WorkerID(wi), s.minted[core.WorkerID(wi)][k-1], nil
}

// forged builds the message of a forge command from its fields.
func (s *script) forged(kind string, fields []string) (rref.Message, error) {
	var rr rref.RRefID
	var fork, parent, child rref.ForkID
	var fetch uint64
	var refused, confirms bool
	var value []byte
	for _, f := range fields {
		k, v, _ := strings.Cut(f, "=")
		switch k {
		case "rref", "fork", "parent", "child":
			w, x, err := s.id(v)
			if err != nil {
				return nil, err
			}
			switch k {
			case "rref":
				rr = rref.RRefID{Worker: w, Local: x}
			case "fork":
				fork = rref.ForkID{Worker: w, Local: x}
			case "parent":
				parent = rref.ForkID{Worker: w, Local: x}
			case "child":
				child = rref.ForkID{Worker: w, Local: x}
			}
		case "fetch":
			n, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				return nil, err
			}
			fetch = n
		case "refused":
			refused = v == "true"
		case "confirms":
			confirms = v == "true"
		case "value":
			value = []byte(v)
		default:
			return nil, fmt.Errorf("unknown field %q", k)
		}
	}
	switch kind {
	case "ForkRequest":
		return &rref.ForkRequest{RRef: rr, Fork: fork, Parent: parent}, nil
	case "FetchCall":
		return &rref.FetchCall{FetchID: fetch, RRef: rr, Fork: fork}, nil
	case "FetchRet":
		return &rref.FetchRet{FetchID: fetch, RRef: rr, Value: value, Confirms: confirms}, nil
	case "UserDelete":
		return &rref.UserDelete{RRef: rr, Fork: fork}, nil
	case "ChildAccept":
		return &rref.ChildAccept{RRef: rr, Child: child, Refused: refused}, nil
	case "ForkAck":
		return &rref.ForkAck{RRef: rr, Fork: fork, Refused: refused}, nil
	}
	return nil, fmt.Errorf("cannot forge %s", kind)
}

func (s *script) core(w string) *core.Core     { return s.cores[s.ids[w]-1] }
func (s *script) name(id core.WorkerID) string { return s.names[id-1] }

func (s *script) emit(format string, args ...any) {
	s.out = append(s.out, s.short(fmt.Sprintf(format, args...)))
}

func (s *script) handle(w, x string) core.HandleID { return s.handles[w+"/"+x] }

// drain collects what a core produced and plays the program's part.
func (s *script) drain(id core.WorkerID) {
	c := s.cores[id-1]
	for c.HasReady() {
		r := c.TakeReady()
		for _, m := range r.Messages {
			s.emit("%s->%s %s", s.name(m.From), s.name(m.To), core.FormatMessage(m.Msg))
			if !s.dead[m.To-1] {
				s.net = append(s.net, m)
			}
		}
		for _, f := range r.Freed {
			s.emit("%s freed %d:%d value=%q", s.name(id), f.RRef.Worker, f.RRef.Local, f.Value)
		}
		for _, ack := range r.DeferredAcks {
			s.emit("%s holds back the RemoteRet of %d:%d", s.name(id), ack.Worker, ack.Local)
			s.held[id] = append(s.held[id], ack)
		}
		for _, e := range r.Errors {
			s.emit("%s error: %v", s.name(id), e)
		}
		for _, run := range r.Runs {
			switch {
			case run.Kind == core.RunRemote:
				s.emit("%s runs %s(%s) for %d:%d", s.name(id), run.Fn, run.Args, run.RRef.Worker, run.RRef.Local)
				c.CompleteRemote(run.RRef, run.Args, scriptFailure(run.Fn))
			case run.Fn == scenario.FnPass:
				s.emit("%s runs the call with %s", s.name(id), run.Args)
				s.handles[s.name(id)+"/"+string(run.Args)] = run.Handles[0]
				c.Return(run.From, run.CallID, nil, nil, core.Failure{})
			case run.Fn == scenario.FnReturn:
				s.emit("%s returns %s", s.name(id), run.Args)
				c.Return(run.From, run.CallID, nil, []core.HandleID{s.handle(s.name(id), string(run.Args))}, core.Failure{})
			}
		}
		for _, f := range r.Fetches {
			x := s.fetchFor[fmt.Sprintf("%s/%d", s.name(id), f.FetchID)]
			if f.Err == rref.ErrorKindNone {
				s.emit("%s fetched %s = %s", s.name(id), x, f.Value)
			} else {
				s.emit("%s fetch of %s failed: %s", s.name(id), x, f.Err)
			}
		}
		for _, cr := range r.Calls {
			if y, ok := s.returns[fmt.Sprintf("%s/%d", s.name(id), cr.CallID)]; ok && len(cr.Handles) == 1 {
				s.emit("%s receives %s", s.name(id), y)
				s.handles[s.name(id)+"/"+y] = cr.Handles[0]
			}
		}
	}
}

func (s *script) run(line string) error {
	f := strings.Fields(line)
	arg := func(i int) string {
		if i < len(f) {
			return f[i]
		}
		return ""
	}
	switch f[0] {
	case "workers":
		names := f[1:]
		var opts []core.Option
		if i := slices.Index(names, "+held-acks"); i >= 0 {
			names = slices.Delete(slices.Clone(names), i, i+1)
			opts = append(opts, core.WithDeferredAcks())
		}
		for i, n := range names {
			id := core.WorkerID(i + 1)
			s.names = append(s.names, n)
			s.ids[n] = id
			s.cores = append(s.cores, core.New(id, append([]core.Option{core.WithIDSeed(scriptSeed(id))}, opts...)...))
			s.dead = append(s.dead, false)
			s.learnIDs(id)
		}
		return nil
	case "new", "remote", "pass", "return", "fetch", "release", "timeout", "advance", "crash":
		// The scenario language's own commands, run by its interpreter.
		c, err := scenario.ParseCommand(s.names, line)
		if err != nil {
			return err
		}
		return scenario.Exec(s, &c)
	case "deliver", "deliver-all":
		for {
			i := slices.IndexFunc(s.net, func(e core.Envelope) bool {
				return (arg(1) == "" || s.name(e.From) == arg(1)) && (arg(2) == "" || s.name(e.To) == arg(2)) &&
					(arg(3) == "" || e.Msg.MessageCode().String() == arg(3))
			})
			if i < 0 {
				if f[0] == "deliver" {
					return fmt.Errorf("no such message in flight")
				}
				return nil
			}
			e := s.net[i]
			s.net = slices.Delete(s.net, i, i+1)
			s.emit("deliver %s->%s %s", s.name(e.From), s.name(e.To), core.FormatMessage(e.Msg))
			s.cores[e.To-1].Deliver(e.From, e.Msg)
			s.drain(e.To)
			if f[0] == "deliver" {
				return nil
			}
		}
	case "dup":
		i := slices.IndexFunc(s.net, func(e core.Envelope) bool {
			return s.name(e.From) == arg(1) && s.name(e.To) == arg(2) && e.Msg.MessageCode().String() == arg(3)
		})
		if i < 0 {
			return fmt.Errorf("no such message in flight")
		}
		s.net = append(s.net, s.net[i])
		s.emit("resent %s->%s %s", arg(1), arg(2), core.FormatMessage(s.net[i].Msg))
		return nil
	case "state":
		for i, c := range s.cores {
			if s.dead[i] || arg(1) != "" && s.names[i] != arg(1) {
				continue
			}
			d := strings.TrimRight(c.Dump(), "\n")
			if d == "" {
				d = "(empty)"
			}
			for _, l := range strings.Split(d, "\n") {
				s.emit("%s: %s", s.names[i], l)
			}
		}
		return nil
	case "counters":
		n := s.core(arg(1)).Counters()
		s.emit("owners=%d forks=%d pending_users=%d pending_children=%d pending_messages=%d duplicates=%d bad_input=%d illegal=%d",
			n.Owners, n.Forks, n.PendingUsers, n.PendingChildren, n.PendingMessages, n.Duplicates, n.BadInput, n.Illegal)
		if n.Awaiting != 0 || n.Charged != 0 || n.Expired != 0 {
			s.emit("awaiting=%d charged=%d expired=%d", n.Awaiting, n.Charged, n.Expired)
		}
		return nil
	case "forge":
		m, err := s.forged(arg(3), f[4:])
		if err != nil {
			return err
		}
		s.emit("%s->%s %s (forged)", arg(1), arg(2), core.FormatMessage(m))
		s.net = append(s.net, core.Envelope{From: s.ids[arg(1)], To: s.ids[arg(2)], Msg: m})
		return nil
	case "tick":
		n := 1
		if arg(2) != "" {
			var err error
			if n, err = strconv.Atoi(arg(2)); err != nil {
				return err
			}
		}
		for range n {
			s.core(arg(1)).Tick()
		}
	case "flush":
		id := s.ids[arg(1)]
		for _, ack := range s.held[id] {
			s.core(arg(1)).FlushAck(ack)
		}
		s.held[id] = nil
	default:
		return fmt.Errorf("unknown command %q", f[0])
	}
	s.drain(s.ids[arg(1)])
	return nil
}

// The script is a scenario.Target: the commands the scenario language
// shares with it are the language's, parsed and dispatched by
// internal/scenario; the network stays explicit (deliver, dup).

func (s *script) New(w, x string, v int64) error {
	s.handles[w+"/"+x] = s.core(w).NewLocal([]byte(strconv.FormatInt(v, 10)))
	s.drain(s.ids[w])
	return nil
}

func (s *script) Remote(w, owner, x string, v int64, fail bool) error {
	fn, val := scenario.FnIdentity, strconv.FormatInt(v, 10)
	if fail {
		fn, val = scenario.FnFail, ""
	}
	h, err := s.core(w).Remote(s.ids[owner], fn, []byte(val), nil)
	if err != nil {
		return err
	}
	s.handles[w+"/"+x] = h
	s.drain(s.ids[w])
	return nil
}

func (s *script) Pass(w, to, x, y string) error {
	if _, err := s.core(w).Call(s.ids[to], scenario.FnPass, []byte(y), []core.HandleID{s.handle(w, x)}); err != nil {
		return err
	}
	s.drain(s.ids[w])
	return nil
}

func (s *script) Return(w, caller, x, y string) error {
	id, err := s.core(caller).Call(s.ids[w], scenario.FnReturn, []byte(x), nil)
	if err != nil {
		return err
	}
	s.returns[fmt.Sprintf("%s/%d", caller, id)] = y
	s.drain(s.ids[caller])
	return nil
}

func (s *script) Fetch(w, x string) error {
	id := s.core(w).Fetch(s.handle(w, x))
	s.fetchFor[fmt.Sprintf("%s/%d", w, id)] = x
	s.drain(s.ids[w])
	return nil
}

func (s *script) Release(w, x string) error {
	if err := s.core(w).Release(s.handle(w, x)); err != nil {
		s.emit("release error: %v", err)
	}
	s.drain(s.ids[w])
	return nil
}

func (s *script) Timeout(w, x string) error {
	if err := s.core(w).Timeout(s.handle(w, x)); err != nil {
		return err
	}
	s.drain(s.ids[w])
	return nil
}

// Advance ticks the cores as the scenario language says: one worker's, or
// every live one's.
func (s *script) Advance(w string, ticks int64) error {
	for i, c := range s.cores {
		if s.dead[i] || w != "" && s.names[i] != w {
			continue
		}
		for range ticks {
			c.Tick()
		}
		s.drain(core.WorkerID(i + 1))
	}
	return nil
}

// Crash tells every other core at once (the network of a script is explicit;
// failure notices are not messages in it).
func (s *script) Crash(w string) error {
	x := s.ids[w]
	s.dead[x-1] = true
	s.net = slices.DeleteFunc(s.net, func(e core.Envelope) bool { return e.From == x || e.To == x })
	for i, c := range s.cores {
		if !s.dead[i] {
			c.PeerFailed(x)
			s.drain(core.WorkerID(i + 1))
		}
	}
	return nil
}

func (s *script) Duplicate(from, to, kind string) error {
	return fmt.Errorf("a script resends with dup W V Kind")
}

func (s *script) Settle() error                        { return fmt.Errorf("a script delivers with deliver-all") }
func (s *script) Alive(w string) bool                  { return !s.dead[s.ids[w]-1] }
func (s *script) Holds(w, x string) bool               { _, ok := s.handles[w+"/"+x]; return ok }
func (s *script) Fetched(w, x string) scenario.Fetched { return scenario.Fetched{} }
func (s *script) Quiet() bool                          { return len(s.net) == 0 }
func (s *script) Busy() string                         { return "" }
func (s *script) Unclean() string                      { return "" }

func (s *script) Counters(w string) (scenario.Counters, error) {
	n := s.core(w).Counters()
	return scenario.Counters{Owners: n.Owners, Forks: n.Forks, PendingUsers: n.PendingUsers, PendingChildren: n.PendingChildren}, nil
}

func TestScripts(t *testing.T) {
	paths, _ := filepath.Glob(filepath.Join("testdata", "*.txt"))
	if len(paths) == 0 {
		t.Fatal("no script tests")
	}
	for _, path := range paths {
		t.Run(filepath.Base(path), func(t *testing.T) {
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			s := &script{ids: map[string]core.WorkerID{}, handles: map[string]core.HandleID{}, returns: map[string]string{}, fetchFor: map[string]string{},
				alias: map[core.WorkerID]map[uint64]int{}, minted: map[core.WorkerID][]uint64{}, held: map[core.WorkerID][]core.RRefID{}}
			var got []string
			for i, line := range strings.Split(strings.TrimRight(string(data), "\n"), "\n") {
				switch {
				case strings.HasPrefix(line, "#") || line == "":
					got = append(got, line)
				case strings.HasPrefix(line, "> "):
					got = append(got, line)
					s.out = nil
					if err := s.run(strings.TrimPrefix(line, "> ")); err != nil {
						t.Fatalf("%s:%d: %v", path, i+1, err)
					}
					got = append(got, s.out...)
				}
			}
			for i, c := range s.cores {
				if !s.dead[i] && c.Counters().Illegal != 0 {
					t.Errorf("%s reported illegal transitions", s.names[i])
				}
			}
			want := strings.TrimRight(string(data), "\n")
			have := strings.Join(got, "\n")
			if *rewrite {
				if err := os.WriteFile(path, []byte(have+"\n"), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			if have != want {
				t.Fatalf("%s differs (run with -rewrite and review the diff; -want +have):\n%s", path,
					cmp.Diff(strings.Split(want, "\n"), strings.Split(have, "\n")))
			}
		})
	}
}

// scriptFailure is how the scripts' functions end: FnFail fails, the rest succeed.
func scriptFailure(fn string) core.Failure {
	if fn == scenario.FnFail {
		return core.Failure{Kind: rref.ErrorKindUser, Message: "function failed"}
	}
	return core.Failure{}
}
