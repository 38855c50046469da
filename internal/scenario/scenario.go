// Package scenario is the scenario language of rrefkit's conformance suite,
// written once: its parser, and the interpreter (Program) that runs a
// parsed scenario against any Target. The targets are the pure core in a
// simulated network (package conformance, every interleaving), the real
// runtime's workers (conformance's runtime target) and the core's script
// tests (runtime/core/testdata). conformance/README.md documents the
// language.
package scenario

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/rrefkit/rref/generated/rref"
)

// The functions a scenario's commands run, as every target registers and
// calls them: remote runs FnIdentity (its value) or FnFail (a user
// error), pass calls FnPass on the receiver, which binds the handle it is
// given, and return calls FnReturn on the worker that returns a handle.
const (
	FnIdentity = "identity"
	FnFail     = "fail"
	FnPass     = "__pass"
	FnReturn   = "__return"
)

// Op is a scenario command.
type Op string

const (
	OpWorkers Op = "workers"
	OpNew     Op = "new"
	OpRemote  Op = "remote"
	OpPass    Op = "pass"
	OpReturn  Op = "return"
	OpFetch   Op = "fetch"
	OpRelease Op = "release"
	OpSettle  Op = "settle"
	OpCrash   Op = "crash"
	OpTimeout Op = "timeout"
	// OpAdvance moves time on: "advance N" ticks every live worker's
	// clock N times, "advance W N" W's alone.
	OpAdvance Op = "advance"
	OpExpect  Op = "expect"
	// OpDuplicate is an extension of the language: "duplicate W V K" makes the
	// network deliver the next message of type K from W to V twice, as a resend
	// after a reconnect would.
	OpDuplicate Op = "duplicate"
)

// Cmd is one parsed line.
type Cmd struct {
	Line   int
	Text   string
	Op     Op
	W, V   string // the acting worker; the other worker (owner, callee or caller)
	X, Y   string // handles
	Value  int64
	Fail   bool   // remote ... fail
	Expect string // value, error, either, count, clean
	Kind   string // error kind or counter name
	N      int64  // expected count
}

// Scenario is a parsed scenario file.
type Scenario struct {
	Name    string
	Workers []string
	Cmds    []Cmd // after the workers line
	Comment string
	Source  string // the file as parsed, to print a failing enumerated program
}

var nameRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_]*$`)

// MaxAdvance bounds the ticks one advance takes: each is a step of every
// core it reaches, and a core gives a record up after
// core.DefaultPendingTicks (40) of them, so a thousand, twenty-five
// expiry periods, is past anything a scenario needs, and a mistyped
// count cannot hang a run.
const MaxAdvance = 1000

// ErrorKinds are the failure kinds `expect error` accepts.
var ErrorKinds = []string{"user", "timeout", "deleted", "owner-failed", "lost"}

// CounterNames are the counters `expect count` accepts.
var CounterNames = []string{"owners", "forks", "pending_users", "pending_children"}

// MessageNames are the message types "duplicate" accepts.
func MessageNames() []string {
	var out []string
	for _, c := range rref.Codes {
		out = append(out, c.String())
	}
	return out
}

func contains(list []string, s string) bool { return slices.Contains(list, s) }

// Parse reads a scenario. Every problem is reported with its line number, and
// a malformed file is rejected whole, before anything runs.
func Parse(name string, src []byte) (*Scenario, error) {
	sc := &Scenario{Name: name, Source: string(src)}
	p := &parser{name: name, workers: map[string]bool{}}
	var comment []string
	inHeader := true
	for i, raw := range strings.Split(string(src), "\n") {
		line := i + 1
		text := raw
		if j := strings.IndexByte(text, '#'); j >= 0 {
			if inHeader && strings.TrimSpace(text[:j]) == "" {
				comment = append(comment, strings.TrimSpace(text[j+1:]))
			}
			text = text[:j]
		}
		f := strings.Fields(text)
		if len(f) == 0 {
			continue
		}
		inHeader = false
		if Op(f[0]) == OpWorkers {
			if sc.Workers != nil {
				p.fail(line, "workers declared twice")
				continue
			}
			if len(f) == 1 {
				p.fail(line, "workers needs at least one name")
				continue
			}
			for _, w := range f[1:] {
				if !nameRE.MatchString(w) {
					p.fail(line, "bad worker name %q", w)
				} else if p.workers[w] {
					p.fail(line, "worker %q declared twice", w)
				}
				p.workers[w] = true
				sc.Workers = append(sc.Workers, w)
			}
			continue
		}
		if sc.Workers == nil {
			p.fail(line, "the first command must be \"workers\"")
			break
		}
		p.declared = sc.Workers
		if c, ok := p.command(line, f); ok {
			sc.Cmds = append(sc.Cmds, c)
		}
	}
	if sc.Workers == nil && len(p.errs) == 0 {
		p.errs = append(p.errs, fmt.Sprintf("%s:1: no \"workers\" line", name))
	}
	sc.Comment = strings.Join(comment, " ")
	if len(p.errs) > 0 {
		return nil, fmt.Errorf("scenario: %s", strings.Join(p.errs, "\n"))
	}
	return sc, nil
}

// ParseCommand parses one command line (not "workers") of a program whose
// workers are declared, as Parse would.
func ParseCommand(workers []string, text string) (Cmd, error) {
	p := &parser{name: "command", workers: map[string]bool{}, declared: workers}
	for _, w := range workers {
		p.workers[w] = true
	}
	f := strings.Fields(text)
	if len(f) == 0 || Op(f[0]) == OpWorkers {
		return Cmd{}, fmt.Errorf("scenario: %q is not a command", text)
	}
	c, ok := p.command(1, f)
	if !ok || len(p.errs) > 0 {
		return Cmd{}, fmt.Errorf("scenario: %s", strings.Join(p.errs, "\n"))
	}
	return c, nil
}

type parser struct {
	name     string
	workers  map[string]bool
	declared []string
	errs     []string
}

func (p *parser) fail(line int, format string, args ...any) {
	p.errs = append(p.errs, fmt.Sprintf("%s:%d: %s", p.name, line, fmt.Sprintf(format, args...)))
}

// command parses one command's fields; ok is false when it is malformed
// (the problem is in p.errs).
func (p *parser) command(line int, f []string) (c Cmd, ok bool) {
	errs := len(p.errs)
	fail := p.fail
	workers := p.workers
	c = Cmd{Line: line, Text: strings.Join(f, " "), Op: Op(f[0])}
	args := f[1:]
	need := func(n int, usage string) bool {
		if len(args) != n {
			fail(line, "%s takes %d arguments: %s", f[0], n, usage)
			return false
		}
		return true
	}
	worker := func(s string) bool {
		if !workers[s] {
			fail(line, "unknown worker %q (declared: %s)", s, strings.Join(p.declared, " "))
			return false
		}
		return true
	}
	handle := func(s string) bool {
		if !nameRE.MatchString(s) {
			fail(line, "bad handle name %q", s)
			return false
		}
		return true
	}
	value := func(s string) (int64, bool) {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			fail(line, "bad integer %q", s)
			return 0, false
		}
		return v, true
	}
	switch c.Op {
	case OpNew:
		if need(3, "new W x V") && worker(args[0]) && handle(args[1]) {
			c.W, c.X = args[0], args[1]
			c.Value, _ = value(args[2])
		}
	case OpRemote:
		if need(4, "remote W O x V|fail") && worker(args[0]) && worker(args[1]) && handle(args[2]) {
			c.W, c.V, c.X = args[0], args[1], args[2]
			if args[3] == "fail" {
				c.Fail = true
			} else {
				c.Value, _ = value(args[3])
			}
		}
	case OpPass, OpReturn:
		if need(4, string(c.Op)+" W V x y") && worker(args[0]) && worker(args[1]) && handle(args[2]) && handle(args[3]) {
			c.W, c.V, c.X, c.Y = args[0], args[1], args[2], args[3]
		}
	case OpFetch, OpRelease, OpTimeout:
		if need(2, string(c.Op)+" W x") && worker(args[0]) && handle(args[1]) {
			c.W, c.X = args[0], args[1]
		}
	case OpSettle:
		need(0, "settle")
	case OpAdvance:
		n := args
		if len(args) == 2 {
			if !worker(args[0]) {
				break
			}
			c.W, n = args[0], args[1:]
		}
		if len(n) != 1 {
			fail(line, "advance takes 1 or 2 arguments: advance [W] N")
			break
		}
		if v, ok := value(n[0]); ok {
			if v < 1 || v > MaxAdvance {
				fail(line, "advance by %d ticks: want 1 to %d", v, MaxAdvance)
			}
			c.Value = v
		}
	case OpDuplicate:
		if need(3, "duplicate W V K") && worker(args[0]) && worker(args[1]) {
			c.W, c.V, c.Kind = args[0], args[1], args[2]
			if !contains(MessageNames(), c.Kind) {
				fail(line, "unknown message type %q (one of %s)", c.Kind, strings.Join(MessageNames(), ", "))
			}
		}
	case OpCrash:
		if need(1, "crash W") && worker(args[0]) {
			c.W = args[0]
		}
	case OpExpect:
		if len(args) == 0 {
			fail(line, "expect needs a kind: value, error, either, count or clean")
			return c, false
		}
		c.Expect = args[0]
		rest := args[1:]
		switch c.Expect {
		case "value":
			if len(rest) != 3 {
				fail(line, "expect value takes 3 arguments: expect value W x V")
			} else if worker(rest[0]) && handle(rest[1]) {
				c.W, c.X = rest[0], rest[1]
				c.Value, _ = value(rest[2])
			}
		case "error":
			if len(rest) != 3 {
				fail(line, "expect error takes 3 arguments: expect error W x K")
			} else if worker(rest[0]) && handle(rest[1]) {
				c.W, c.X, c.Kind = rest[0], rest[1], rest[2]
				if !contains(ErrorKinds, c.Kind) {
					fail(line, "unknown error kind %q (one of %s)", c.Kind, strings.Join(ErrorKinds, ", "))
				}
			}
		case "either":
			if len(rest) != 4 {
				fail(line, "expect either takes 4 arguments: expect either W x V K")
			} else if worker(rest[0]) && handle(rest[1]) {
				c.W, c.X, c.Kind = rest[0], rest[1], rest[3]
				c.Value, _ = value(rest[2])
				if !contains(ErrorKinds, c.Kind) {
					fail(line, "unknown error kind %q (one of %s)", c.Kind, strings.Join(ErrorKinds, ", "))
				}
			}
		case "count":
			if len(rest) != 3 {
				fail(line, "expect count takes 3 arguments: expect count W K N")
			} else if worker(rest[0]) {
				c.W, c.Kind = rest[0], rest[1]
				if !contains(CounterNames, c.Kind) {
					fail(line, "unknown counter %q (one of %s)", c.Kind, strings.Join(CounterNames, ", "))
				}
				c.N, _ = value(rest[2])
			}
		case "clean":
			if len(rest) != 0 {
				fail(line, "expect clean takes no arguments")
			}
		default:
			fail(line, "unknown expectation %q (value, error, either, count or clean)", c.Expect)
		}
	default:
		fail(line, "unknown command %q", f[0])
	}
	return c, len(p.errs) == errs
}
