package conformance

import (
	"fmt"
	"strings"

	"github.com/rrefkit/rref/runtime/core"
)

// Bound limits the programs Enumerate writes: at most Workers workers and
// Commands commands before the postlude.
type Bound struct {
	Workers  int
	Commands int
}

// Enumerate writes every scenario program within b, once up to renaming,
// and hands each to visit until visit returns false; it returns how many
// it handed over. The commands are new, remote (and remote to self), pass,
// return, fetch, release, timeout (of a remote to another worker), one
// crash and, once a remote to another worker was made, one advance of
// every clock by the expiry period (core.DefaultPendingTicks). Workers and handles are named in
// order of first use (A, B, C...; h1, h2...), so programs that differ only
// in names are written once. A postlude releases what the program still
// holds, settles and, when everything was released, expects clean.
//
// A program never names a handle a crash may have kept from arriving: a
// handle received by pass or return can be used after a crash only if a
// command used it before (commands wait for their handle, so it had
// arrived). That is the one trap the language warns of, and it would make
// a correct protocol fail L1.
func Enumerate(b Bound, visit func(*Scenario) bool) int {
	e := &enumerator{b: b, visit: visit, written: map[string]bool{}}
	e.step(progState{})
	return e.n
}

type enumerator struct {
	b     Bound
	visit func(*Scenario) bool
	n     int
	stop  bool
	// written: a program whose last commands are the releases the
	// postlude adds comes out as the shorter program does; each is run once.
	written map[string]bool
}

type progHandleState struct {
	worker   int
	name     string
	received bool // by pass or return: it may not have arrived
	present  bool // a command used it, so it is there
	released bool
	fetched  bool
	remote   bool // made by this worker's remote to another: it may time out
	timedOut bool
	owner    int // the worker that owns the value
}

type progState struct {
	lines   []string
	workers int // named so far
	handles []progHandleState
	crashed int // 1 + the crashed worker, or 0
	// awaits: a remote to another worker was made, so an owner may come to
	// await its RemoteCall, and time passing may give the value up;
	// advanced: time has passed (once a program is enough to expire it).
	awaits, advanced bool
	// duplicated: a command's message to the owner was resent (once a
	// program); the duplicate line counts as a command.
	duplicated bool
}

func (s progState) clone() progState {
	n := s
	n.lines = append([]string(nil), s.lines...)
	n.handles = append([]progHandleState(nil), s.handles...)
	return n
}

func workerName(i int) string { return string(rune('A' + i)) }

// candidates are the workers a command may name: those named so far and
// the next one, never the crashed one.
func (e *enumerator) candidates(s progState) []int {
	var out []int
	for i := 0; i < min(s.workers+1, e.b.Workers); i++ {
		if s.crashed != i+1 {
			out = append(out, i)
		}
	}
	return out
}

func (e *enumerator) emit(s progState) {
	if e.stop {
		return
	}
	lines := append([]string(nil), s.lines...)
	all := true
	for _, h := range s.handles {
		if h.released || h.worker+1 == s.crashed {
			continue
		}
		if h.received && !h.present && s.crashed != 0 {
			all = false // it may never arrive: leave it
			continue
		}
		lines = append(lines, fmt.Sprintf("release %s %s", workerName(h.worker), h.name))
	}
	lines = append(lines, "settle")
	if all {
		lines = append(lines, "expect clean")
	}
	var ws []string
	for i := 0; i < max(s.workers, 1); i++ {
		ws = append(ws, workerName(i))
	}
	src := "# enumerated\nworkers " + strings.Join(ws, " ") + "\n" + strings.Join(lines, "\n") + "\n"
	if e.written[src] {
		return
	}
	e.written[src] = true
	sc, err := Parse(fmt.Sprintf("enumerated#%d", e.n+1), []byte(src))
	if err != nil {
		panic(fmt.Sprintf("conformance: an enumerated program does not parse: %v\n%s", err, src)) // a bug here, not bad input
	}
	e.n++
	if !e.visit(sc) {
		e.stop = true
	}
}

func (e *enumerator) step(s progState) {
	if e.stop {
		return
	}
	if len(s.lines) > 0 {
		e.emit(s)
	}
	if len(s.lines) >= e.b.Commands {
		return
	}
	next := func(n progState, line string, named ...int) {
		for _, w := range named {
			n.workers = max(n.workers, w+1)
		}
		n.lines = append(n.lines, line)
		e.step(n)
	}
	// resent is next with the message of kind from worker from to owner
	// to, which the command sends, delivered twice: the owner must ignore
	// the repeat. The two messages that make an owner count something
	// new, a remote's RemoteCall and the ForkRequest of a handle passed
	// on, are resent; once a program.
	resent := func(n progState, line, kind string, from, to int, named ...int) {
		if n.duplicated || from == to || len(n.lines)+2 > e.b.Commands {
			return
		}
		n = n.clone()
		n.duplicated = true
		n.lines = append(n.lines, fmt.Sprintf("duplicate %s %s %s", workerName(from), workerName(to), kind))
		next(n, line, named...)
	}
	fresh := fmt.Sprintf("h%d", len(s.handles)+1)
	ws := e.candidates(s)
	for _, w := range ws {
		n := s.clone()
		n.handles = append(n.handles, progHandleState{worker: w, name: fresh, owner: w})
		next(n, fmt.Sprintf("new %s %s 1", workerName(w), fresh), w)
		for _, o := range e.candidates(progState{workers: max(s.workers, w+1), crashed: s.crashed}) {
			n := s.clone()
			n.handles = append(n.handles, progHandleState{worker: w, name: fresh, remote: o != w, owner: o})
			n.awaits = n.awaits || o != w
			line := fmt.Sprintf("remote %s %s %s 1", workerName(w), workerName(o), fresh)
			next(n, line, w, o)
			resent(n, line, "RemoteCall", w, o, w, o)
		}
	}
	for i, h := range s.handles {
		if h.released || h.worker+1 == s.crashed || s.crashed != 0 && h.received && !h.present {
			continue
		}
		w := workerName(h.worker)
		for _, v := range e.candidates(s) {
			for _, op := range []string{"pass", "return"} {
				if op == "return" && v == h.worker {
					continue
				}
				n := s.clone()
				n.handles[i].present = true
				n.handles = append(n.handles, progHandleState{worker: v, name: fresh, received: true, owner: h.owner})
				line := fmt.Sprintf("%s %s %s %s %s", op, w, workerName(v), h.name, fresh)
				next(n, line, v)
				if op == "pass" && h.worker != h.owner { // a user's handle: its receiver asks the owner for its fork
					resent(n, line, "ForkRequest", v, h.owner, v)
				}
			}
		}
		if !h.fetched {
			n := s.clone()
			n.handles[i].present, n.handles[i].fetched = true, true
			next(n, fmt.Sprintf("fetch %s %s", w, h.name))
		}
		if h.remote && !h.timedOut {
			n := s.clone()
			n.handles[i].timedOut = true
			next(n, fmt.Sprintf("timeout %s %s", w, h.name))
		}
		n := s.clone()
		n.handles[i].present, n.handles[i].released = true, true
		next(n, fmt.Sprintf("release %s %s", w, h.name))
	}
	if s.awaits && !s.advanced {
		n := s.clone()
		n.advanced = true
		next(n, fmt.Sprintf("advance %d", core.DefaultPendingTicks))
	}
	if s.crashed == 0 {
		for w := 0; w < s.workers; w++ {
			n := s.clone()
			n.crashed = w + 1
			next(n, "crash "+workerName(w))
		}
	}
}
