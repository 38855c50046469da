package explore_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/rrefkit/rref/explore"
	"github.com/rrefkit/rref/genrt"
)

// doorMachine is a machine as rrefgen declares one. Its last transition,
// a locked door opened, is one the door model below never takes: its
// program unlocks a door before it opens it.
var doorMachine = genrt.MachineInfo{
	Name:   "Door",
	States: []genrt.StateInfo{{Name: "closed", Start: true}, {Name: "open"}, {Name: "locked"}},
	Events: []genrt.EventInfo{{Name: "Open"}, {Name: "Close"}, {Name: "Lock"}, {Name: "Unlock"}, {Name: "Knock"}},
	Transitions: []genrt.Transition{
		{From: "closed", Event: "Open", To: "open"},
		{From: "open", Event: "Close", To: "closed"},
		{From: "closed", Event: "Lock", To: "locked"},
		{From: "locked", Event: "Unlock", To: "closed"},
		{From: "open", Event: "Knock"}, // ignored
		{From: "locked", Event: "Open", To: "open"},
	},
}

// bellMachine is declared and never stepped.
var bellMachine = genrt.MachineInfo{
	Name:        "Bell",
	States:      []genrt.StateInfo{{Name: "quiet", Start: true}, {Name: "ringing"}},
	Events:      []genrt.EventInfo{{Name: "Ring"}},
	Transitions: []genrt.Transition{{From: "quiet", Event: "Ring", To: "ringing"}},
}

const (
	doorClosed = iota
	doorOpen
	doorLocked
)

const (
	doorOnOpen = iota
	doorOnClose
	doorOnLock
	doorOnUnlock
	doorOnKnock
)

// stepDoor is what rrefgen generates for doorMachine: a table, and the
// step observer told of each legal step.
func stepDoor(s, e int) int {
	table := [3][5]int{ // 0 illegal, 1 ignored, k+2 moves to k
		{doorOpen + 2, 0, doorLocked + 2, 0, 0},
		{0, doorClosed + 2, 0, 0, 1},
		{doorOpen + 2, 0, 0, doorClosed + 2, 0},
	}
	c := table[s][e]
	switch c {
	case 0:
		panic(fmt.Sprintf("illegal: state %d, event %d", s, e))
	case 1:
		if genrt.Observing() {
			genrt.Observe(&doorMachine, s, e, s, genrt.Ignored)
		}
		return s
	}
	if genrt.Observing() {
		genrt.Observe(&doorMachine, s, e, c-2, genrt.Moved)
	}
	return c - 2
}

// door is a model whose program opens, knocks on, closes, locks and
// unlocks a door, doorMoves steps in all, in any order its state allows;
// it never opens a locked door.
type door struct {
	state, moves int
}

const doorMoves = 6

func (d *door) Choices() []int {
	if d.moves == doorMoves {
		return nil
	}
	switch d.state {
	case doorClosed:
		return []int{doorOnOpen, doorOnLock}
	case doorOpen:
		return []int{doorOnClose, doorOnKnock}
	}
	return []int{doorOnUnlock}
}

func (d *door) Step(e int)                    { d.state = stepDoor(d.state, e); d.moves++ }
func (d *door) Clone() *door                  { n := *d; return &n }
func (d *door) AppendState(b []byte) []byte   { return fmt.Appendf(b, "%d %d", d.state, d.moves) }
func (d *door) Violation() *explore.Violation { return nil }
func (d *door) CheckEnd()                     {}
func (d *door) Describe(e int) string         { return doorMachine.Events[e].Name }
func (d *door) ChoiceKey(e int) string        { return fmt.Sprint(e) }
func (d *door) Machines() []*genrt.MachineInfo {
	return []*genrt.MachineInfo{&bellMachine, &doorMachine}
}

// TestCoverageFindsTheUnreachableTransition: the report lists every
// transition declared, the machines the model names first; the one the
// model never takes, and the bell's, are not taken; the others are, in
// the exhaustive search and the walks alike.
func TestCoverageFindsTheUnreachableTransition(t *testing.T) {
	want := []string{"Bell: quiet --Ring--> ringing", "Door: locked --Open--> open"}
	for _, opt := range []explore.Options{{Coverage: true}, {Coverage: true, Workers: 2}, {Coverage: true, Mode: explore.Random, Walks: 200}} {
		r := explore.Explore(func() *door { return &door{} }, opt)
		if r.Coverage == nil {
			t.Fatalf("%s: no coverage", opt.Mode)
		}
		if got := r.Coverage.NotTaken(); !slices.Equal(got, want) {
			t.Errorf("%s: not taken %q, want %q", opt.Mode, got, want)
		}
		if taken, declared := r.Coverage.Counts(); taken != 5 || declared != 7 {
			t.Errorf("%s: %d of %d taken", opt.Mode, taken, declared)
		}
		if names := []string{r.Coverage.Machines[0].Info.Name, r.Coverage.Machines[1].Info.Name}; !slices.Equal(names, []string{"Bell", "Door"}) {
			t.Errorf("%s: machines in order %v", opt.Mode, names)
		}
		report := r.Coverage.Report()
		for _, line := range []string{"coverage: 5 of 7 spec transitions taken", "machine Door: 5 of 6", "open --Knock--> (ignored)", "locked --Open--> open      never"} {
			if !strings.Contains(report, line) {
				t.Errorf("%s: the report lacks %q:\n%s", opt.Mode, line, report)
			}
		}
	}
	// Off, nothing is recorded, and no observer is left behind.
	if r := explore.Explore(func() *door { return &door{} }, explore.Options{}); r.Coverage != nil || genrt.Observing() {
		t.Fatalf("coverage %v, observing %v", r.Coverage, genrt.Observing())
	}
}

// TestCoverageMerges: two reports together count each transition's steps
// in both, and take a machine only one of them stepped.
func TestCoverageMerges(t *testing.T) {
	a := explore.StartCoverage(&doorMachine)
	stepDoor(doorClosed, doorOnOpen)
	ca := a.Stop()
	b := explore.StartCoverage()
	stepDoor(doorClosed, doorOnOpen)
	stepDoor(doorOpen, doorOnClose)
	cb := b.Stop()
	stepDoor(doorClosed, doorOnOpen) // no recorder: not counted
	ca.Merge(cb)
	open, closed := ca.Machines[0].Transitions[0], ca.Machines[0].Transitions[1]
	if len(ca.Machines) != 1 || open.Taken != 2 || closed.Taken != 1 {
		t.Fatalf("merged: %+v", ca.Machines)
	}
}
