package scenario

import (
	"fmt"
	"strconv"

	"github.com/rrefkit/rref/explore"
	"github.com/rrefkit/rref/generated/rref"
)

// Target is a system of workers a scenario drives. The interpreter says
// what each command means (what it waits for, what it binds, what an
// expectation accepts); a target says how it is done, on its own cores or
// workers. Every method names workers and handles as the scenario does.
type Target interface {
	// The commands' effects. A target that cannot do one (a real network
	// cannot duplicate on demand) returns an error.
	New(w, x string, v int64) error
	Remote(w, owner, x string, v int64, fail bool) error
	Pass(w, to, x, y string) error       // w calls to with x; to's function binds y
	Return(w, caller, x, y string) error // caller calls w, which returns x; caller binds y
	Fetch(w, x string) error
	Release(w, x string) error
	Timeout(w, x string) error
	// Advance ticks worker w's clock (every live worker's when w is "")
	// ticks times: time passes, and what waits for a deadline expires.
	Advance(w string, ticks int64) error
	Crash(w string) error
	Duplicate(from, to, kind string) error
	Settle() error

	// What the interpreter waits on and checks.
	Alive(w string) bool
	Holds(w, x string) bool // w's program has a handle named x (released or not)
	Fetched(w, x string) Fetched
	Quiet() bool  // nothing is in flight
	Busy() string // a command still running, that the next one waits for; "" if none
	Counters(w string) (Counters, error)
	Unclean() string // a live worker that still holds anything, described; "" if none
}

// Fetched is the outcome of a worker's last fetch of a handle, with what
// the handle it was issued on holds, as the target knows it: a name may be
// bound again (a passed handle arrives under a name in use), so only the
// target can say which value the fetch must return.
type Fetched struct {
	Issued bool
	Done   bool
	Value  string // the value's decimal text, when it succeeded
	Kind   string // the error kind (one of ErrorKinds, or another the target saw); "" on success

	Holds Holding // what the fetched handle holds
}

// Holding is what a handle holds: a value made by new or remote, or the
// failure of a remote's function.
type Holding struct {
	Known bool
	Value string // decimal text
	Fail  bool   // the remote's function failed: a fetch must raise a user error
}

func (f Fetched) String() string {
	if f.Kind == "" {
		return "value " + f.Value
	}
	return "error " + f.Kind
}

// Counters are a worker's protocol tables' sizes, as `expect count` names them.
type Counters struct {
	Owners, Forks, PendingUsers, PendingChildren int
}

func (n Counters) named(name string) int {
	return map[string]int{"owners": n.Owners, "forks": n.Forks, "pending_users": n.PendingUsers, "pending_children": n.PendingChildren}[name]
}

// Exec does the effect of one command on t, without waiting or checking:
// the script tests drive their cores with it, and Program.Step with the
// checks around it. Expectations are Program's, and do nothing here.
func Exec(t Target, c *Cmd) error {
	switch c.Op {
	case OpNew:
		return t.New(c.W, c.X, c.Value)
	case OpRemote:
		return t.Remote(c.W, c.V, c.X, c.Value, c.Fail)
	case OpPass:
		return t.Pass(c.W, c.V, c.X, c.Y)
	case OpReturn:
		return t.Return(c.W, c.V, c.X, c.Y)
	case OpFetch:
		return t.Fetch(c.W, c.X)
	case OpRelease:
		return t.Release(c.W, c.X)
	case OpTimeout:
		return t.Timeout(c.W, c.X)
	case OpAdvance:
		return t.Advance(c.W, c.Value)
	case OpCrash:
		return t.Crash(c.W)
	case OpDuplicate:
		return t.Duplicate(c.W, c.V, c.Kind)
	case OpSettle:
		return t.Settle()
	}
	return nil
}

// Program is one run of a scenario: the next command to run. Its state is
// pc alone, so a model that copies its states copies it by value.
type Program struct {
	sc *Scenario
	pc int
}

// NewProgram starts a run of sc.
func NewProgram(sc *Scenario) Program { return Program{sc: sc} }

// PC is the index of the next command; len(Cmds) when all have run.
func (p *Program) PC() int { return p.pc }

// Done reports whether every command has run.
func (p *Program) Done() bool { return p.pc >= len(p.sc.Cmds) }

// Next is the next command, or nil.
func (p *Program) Next() *Cmd {
	if p.Done() {
		return nil
	}
	return &p.sc.Cmds[p.pc]
}

// Ready reports whether the next command can run now: its worker is alive,
// the handle it names has arrived, settle finds the network quiet, an
// expectation finds its fetch done, and no earlier command still runs.
func (p *Program) Ready(t Target) bool {
	c := p.Next()
	if c == nil || t.Busy() != "" {
		return false
	}
	if c.W != "" && c.Op != OpExpect && c.Op != OpCrash && !t.Alive(c.W) {
		return false // a dead worker runs nothing: the scenario waits (and L1 reports it)
	}
	switch c.Op {
	case OpPass, OpReturn, OpFetch, OpRelease, OpTimeout:
		return t.Holds(c.W, c.X)
	case OpSettle:
		return t.Quiet()
	case OpExpect:
		switch c.Expect {
		case "value", "error", "either":
			return t.Fetched(c.W, c.X).Done
		}
	}
	return true
}

// Blocked describes why the next command cannot run, for L1 reports.
func (p *Program) Blocked(t Target) string {
	c := p.Next()
	if c == nil {
		return "nothing"
	}
	if busy := t.Busy(); busy != "" {
		return fmt.Sprintf("line %d (%s) waits: %s", c.Line, c.Text, busy)
	}
	return fmt.Sprintf("line %d (%s) can never proceed", c.Line, c.Text)
}

// Step runs the next command, which must be Ready, and checks it if it is
// an expectation.
func (p *Program) Step(t Target) *explore.Violation {
	c := p.Next()
	p.pc++
	if c.Op == OpExpect {
		return p.expect(t, c)
	}
	if err := Exec(t, c); err != nil {
		return &explore.Violation{Invariant: rref.InvariantL1, Line: c.Line, Detail: fmt.Sprintf("%s: %v", c.Op, err)}
	}
	return nil
}

func (p *Program) expect(t Target, c *Cmd) *explore.Violation {
	fail := func(format string, args ...any) *explore.Violation {
		return &explore.Violation{Invariant: "expect", Line: c.Line, Detail: fmt.Sprintf(format, args...)}
	}
	switch c.Expect {
	case "count":
		n, err := t.Counters(c.W)
		if err != nil {
			return fail("%s: %v", c.W, err)
		}
		if got := n.named(c.Kind); int64(got) != c.N {
			return fail("%s: %s is %d, want %d", c.W, c.Kind, got, c.N)
		}
		return nil
	case "clean":
		if dirty := t.Unclean(); dirty != "" {
			return fail("%s", dirty)
		}
		return nil
	}
	f := t.Fetched(c.W, c.X)
	want := strconv.FormatInt(c.Value, 10)
	okValue := f.Kind == "" && f.Value == want
	switch {
	case c.Expect == "value" && !okValue:
		return fail("%s's fetch of %s got %s, want value %s", c.W, c.X, f, want)
	case c.Expect == "error" && f.Kind != c.Kind:
		return fail("%s's fetch of %s got %s, want error %s", c.W, c.X, f, c.Kind)
	case c.Expect == "either" && !okValue && f.Kind != c.Kind:
		return fail("%s's fetch of %s got %s, want value %s or error %s", c.W, c.X, f, want, c.Kind)
	}
	return nil
}

// End runs the program's checks when nothing more can happen: every
// command ran (L1), every fetch a live worker issued completed (L1), and
// every fetch that succeeded gave the value the handle it was issued on
// holds, a user error only for a failing function (S4).
func (p *Program) End(t Target) *explore.Violation {
	if c := p.Next(); c != nil || t.Busy() != "" {
		last := p.sc.Cmds[min(p.pc, len(p.sc.Cmds)-1)]
		return &explore.Violation{Invariant: rref.InvariantL1, Line: last.Line, Detail: p.Blocked(t) + ": nothing is in flight"}
	}
	last := map[[2]string]int{} // a handle's last fetch: Fetched reports that one
	for i, c := range p.sc.Cmds {
		if c.Op == OpFetch {
			last[[2]string{c.W, c.X}] = i
		}
	}
	for i, c := range p.sc.Cmds {
		if c.Op != OpFetch || last[[2]string{c.W, c.X}] != i || !t.Alive(c.W) {
			continue
		}
		f := t.Fetched(c.W, c.X)
		if !f.Done {
			return &explore.Violation{Invariant: rref.InvariantL1, Line: c.Line, Detail: fmt.Sprintf("%s's fetch of %s never completed", c.W, c.X)}
		}
		h := f.Holds
		switch {
		case !h.Known:
		case f.Kind == "" && (h.Fail || f.Value != h.Value):
			want := "a user error"
			if !h.Fail {
				want = "value " + h.Value
			}
			return &explore.Violation{Invariant: rref.InvariantS4, Line: c.Line, Detail: fmt.Sprintf("%s's fetch of %s returned %s, want %s", c.W, c.X, f.Value, want)}
		case f.Kind == "user" && !h.Fail:
			return &explore.Violation{Invariant: rref.InvariantS4, Line: c.Line, Detail: fmt.Sprintf("%s's fetch of %s raised a user error, but the function succeeded", c.W, c.X)}
		}
	}
	return nil
}
