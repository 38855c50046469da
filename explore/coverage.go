package explore

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/rrefkit/rref/genrt"
)

// Coverer is implemented by a model whose steps run state machines that
// rrefgen generated: it names them, so that a coverage report
// (Options.Coverage) lists those the search never stepped as well. The
// machines it steps are reported whether it names them or not.
type Coverer interface {
	Machines() []*genrt.MachineInfo
}

// Coverage is which of the spec's transitions a search took, machine by
// machine, as TLC's -coverage reports its actions: a transition never
// taken is one no explored run reaches (a dead line of the spec, or a
// scenario that does not go there).
type Coverage struct {
	Machines []MachineCoverage
}

// MachineCoverage is one machine's transitions, as declared, each with how
// many steps took it.
type MachineCoverage struct {
	Info        *genrt.MachineInfo
	Transitions []TransitionCoverage
}

// TransitionCoverage is a declared transition (To is "" for an event the
// spec ignores in From) and how many of the search's steps took it. Which
// transitions are taken is a property of the states explored; the counts
// also depend on the reductions and the workers (a state explored by two
// workers is stepped twice), and are only a rough measure of how often.
type TransitionCoverage struct {
	genrt.Transition
	Taken int64
}

// String names the transition as the report does.
func (t TransitionCoverage) String() string {
	if t.To == "" {
		return fmt.Sprintf("%s --%s--> (ignored)", t.From, t.Event)
	}
	return fmt.Sprintf("%s --%s--> %s", t.From, t.Event, t.To)
}

// Counts reports how many declared transitions the search took, of how many.
func (c *Coverage) Counts() (taken, declared int) {
	for _, m := range c.Machines {
		for _, t := range m.Transitions {
			declared++
			if t.Taken > 0 {
				taken++
			}
		}
	}
	return taken, declared
}

// NotTaken lists the transitions no step took, as "Machine: from --event--> to".
func (c *Coverage) NotTaken() []string {
	var out []string
	for _, m := range c.Machines {
		for _, t := range m.Transitions {
			if t.Taken == 0 {
				out = append(out, m.Info.Name+": "+t.String())
			}
		}
	}
	return out
}

// Merge adds o's counts to c's: the coverage of two searches together.
// Machines are matched by their declaration (the generated MachineInfo).
func (c *Coverage) Merge(o *Coverage) {
	if o == nil {
		return
	}
	for _, om := range o.Machines {
		i := slices.IndexFunc(c.Machines, func(m MachineCoverage) bool { return m.Info == om.Info })
		if i < 0 {
			c.Machines = append(c.Machines, MachineCoverage{Info: om.Info, Transitions: slices.Clone(om.Transitions)})
			continue
		}
		for j, t := range om.Transitions {
			c.Machines[i].Transitions[j].Taken += t.Taken
		}
	}
}

// Report writes the coverage as a table: per machine, how many of its
// transitions were taken, then each with its count, "never" for one not
// taken.
func (c *Coverage) Report() string {
	var b strings.Builder
	taken, declared := c.Counts()
	fmt.Fprintf(&b, "coverage: %d of %d spec transitions taken\n", taken, declared)
	for _, m := range c.Machines {
		n := 0
		width := 0
		for _, t := range m.Transitions {
			width = max(width, len(t.String()))
			if t.Taken > 0 {
				n++
			}
		}
		fmt.Fprintf(&b, "  machine %s: %d of %d\n", m.Info.Name, n, len(m.Transitions))
		for _, t := range m.Transitions {
			count := "never"
			if t.Taken > 0 {
				count = fmt.Sprint(t.Taken)
			}
			fmt.Fprintf(&b, "    %-*s  %s\n", width, t.String(), count)
		}
	}
	return b.String()
}

// CoverageRecorder counts the steps of generated machines while it
// records (StartCoverage): every step of every generated machine in the
// process, on any goroutine, until Stop. Options.Coverage records one
// search with it; a tool that runs many searches at once (the conformance
// command's -coverage) records them all with one.
type CoverageRecorder struct {
	declared []*genrt.MachineInfo
	mu       sync.Mutex // taken to add a machine
	// machines holds the counters of each machine stepped so far; a
	// machine's first step copies the map, so that the others read it
	// without a lock.
	machines atomic.Pointer[map[*genrt.MachineInfo]*cellCounts]
}

// cellCounts counts the steps of one machine by (from, event): the table
// decides where a step goes, so a cell is a transition.
type cellCounts struct {
	events int
	counts []atomic.Int64
}

var (
	recordersMu sync.Mutex
	recorders   atomic.Pointer[[]*CoverageRecorder] // recording now; read by observe without the lock
	// outer is the observer set before the first recorder started, told
	// of every step as well and set back after the last stops.
	outer atomic.Pointer[genrt.StepObserver]
)

// StartCoverage starts counting the steps of generated machines; declared
// are machines to report even if nothing steps them.
func StartCoverage(declared ...*genrt.MachineInfo) *CoverageRecorder {
	rec := &CoverageRecorder{declared: declared}
	rec.machines.Store(&map[*genrt.MachineInfo]*cellCounts{})
	recordersMu.Lock()
	defer recordersMu.Unlock()
	var now []*CoverageRecorder
	if p := recorders.Load(); p != nil {
		now = slices.Clone(*p)
	}
	if len(now) == 0 {
		if prev := genrt.SetStepObserver(observe); prev != nil {
			outer.Store(&prev)
		}
	}
	now = append(now, rec)
	recorders.Store(&now)
	return rec
}

// observe is genrt's step observer while some recorder records.
func observe(m *genrt.MachineInfo, from, event, to int, out genrt.Outcome) {
	if p := recorders.Load(); p != nil {
		for _, rec := range *p {
			rec.count(m, from, event)
		}
	}
	if o := outer.Load(); o != nil {
		(*o)(m, from, event, to, out)
	}
}

func (rec *CoverageRecorder) count(m *genrt.MachineInfo, from, event int) {
	c := (*rec.machines.Load())[m]
	if c == nil {
		c = rec.add(m)
	}
	if cell := from*c.events + event; from < len(m.States) && event < c.events && cell < len(c.counts) {
		c.counts[cell].Add(1)
	}
}

func (rec *CoverageRecorder) add(m *genrt.MachineInfo) *cellCounts {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	old := *rec.machines.Load()
	if c := old[m]; c != nil {
		return c // added by another goroutine meanwhile
	}
	c := &cellCounts{events: len(m.Events), counts: make([]atomic.Int64, len(m.States)*len(m.Events))}
	next := make(map[*genrt.MachineInfo]*cellCounts, len(old)+1)
	for k, v := range old {
		next[k] = v
	}
	next[m] = c
	rec.machines.Store(&next)
	return c
}

// Stop ends the recording and reports it: the machines declared, in their
// order, then the others stepped, by name.
func (rec *CoverageRecorder) Stop() *Coverage {
	recordersMu.Lock()
	if p := recorders.Load(); p != nil {
		now := slices.DeleteFunc(slices.Clone(*p), func(r *CoverageRecorder) bool { return r == rec })
		recorders.Store(&now)
		if len(now) == 0 {
			var prev genrt.StepObserver
			if o := outer.Swap(nil); o != nil {
				prev = *o
			}
			genrt.SetStepObserver(prev)
		}
	}
	recordersMu.Unlock()
	counted := *rec.machines.Load()
	infos := slices.Clone(rec.declared)
	var others []*genrt.MachineInfo
	for m := range counted {
		if !slices.Contains(infos, m) {
			others = append(others, m)
		}
	}
	slices.SortFunc(others, func(a, b *genrt.MachineInfo) int { return cmp.Compare(a.Name, b.Name) })
	cov := &Coverage{}
	for _, m := range append(infos, others...) {
		cov.Machines = append(cov.Machines, machineCoverage(m, counted[m]))
	}
	return cov
}

// machineCoverage lists m's declared transitions with the counts of
// their cells (c nil: none taken).
func machineCoverage(m *genrt.MachineInfo, c *cellCounts) MachineCoverage {
	states := map[string]int{}
	for i, s := range m.States {
		states[s.Name] = i
	}
	events := map[string]int{}
	for i, e := range m.Events {
		events[e.Name] = i
	}
	out := MachineCoverage{Info: m}
	for _, t := range m.Transitions {
		tc := TransitionCoverage{Transition: t}
		from, okFrom := states[t.From]
		event, okEvent := events[t.Event]
		if c != nil && okFrom && okEvent {
			tc.Taken = c.counts[from*c.events+event].Load()
		}
		out.Transitions = append(out.Transitions, tc)
	}
	return out
}

// searchCoverage serialises the searches that record coverage
// (Options.Coverage): a recorder counts every generated machine's steps
// in the process, so that two searches recording at once would each
// count the other's.
var searchCoverage sync.Mutex

// startCoverage starts recording a search of the model start makes when
// opt asks for coverage; stop ends it and sets r.Coverage.
func startCoverage[M Model[M]](start func() M, opt Options) (stop func(r *Result)) {
	if !opt.Coverage {
		return func(*Result) {}
	}
	var declared []*genrt.MachineInfo
	if c, ok := any(start()).(Coverer); ok {
		declared = c.Machines()
	}
	searchCoverage.Lock()
	rec := StartCoverage(declared...)
	return func(r *Result) {
		r.Coverage = rec.Stop()
		searchCoverage.Unlock()
	}
}
