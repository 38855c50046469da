package soak

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// OpCounts are one kind of operation's figures over the run.
type OpCounts struct {
	Started    uint64 `json:"started"`
	OK         uint64 `json:"ok"`
	FailedKill int    `json:"failed_kill"` // failed with a peer error explained by a kill: allowed
	Wrong      int    `json:"wrong"`
	Hung       int    `json:"hung"`
	Unexpected int    `json:"unexpected"`
}

// Report is a soak run's outcome. The run passed when OK says so.
type Report struct {
	Seed      uint64   `json:"seed"`
	Members   int      `json:"members"`
	Transport string   `json:"transport"`
	FaultSet  []string `json:"fault_set"`
	Reproduce string   `json:"reproduce"`

	Rounds      int           `json:"rounds"`
	Elapsed     time.Duration `json:"elapsed_ns"`
	Interrupted bool          `json:"interrupted,omitempty"`

	Ops          map[string]*OpCounts `json:"ops"`   // by operation kind
	Calls        map[string]uint64    `json:"calls"` // runtime calls by kind, callers' and functions' own
	MessagesSent uint64               `json:"messages_sent"`
	Faults       map[string]int       `json:"faults"` // injected, by kind
	// OKAfterKill counts operations that completed on a member after it
	// heard of a kill in its round: the rest of the group went on.
	OKAfterKill uint64 `json:"ok_after_kill"`
	// FailedKill counts operations that failed because a member they
	// involved was killed: expected, and not a problem.
	FailedKill int `json:"failed_kill"`
	// HeldForDead counts references members still held at the end of a
	// round for a member killed during it; HeldForLive, for a live one
	// (a hold call that failed after its value arrived).
	HeldForDead int `json:"held_for_dead"`
	HeldForLive int `json:"held_for_live"`
	BadInput    int `json:"bad_input"` // messages the cores refused (informational)

	// The counters that must be 0.
	Wrong      int `json:"wrong"`
	Hung       int `json:"hung"`
	Leaked     int `json:"leaked"`    // references listed by LeakErrors
	Unsettled  int `json:"unsettled"` // Shutdowns that gave up holding nothing themselves
	Unexpected int `json:"unexpected"`
	Illegal    int `json:"illegal"` // illegal transitions in a core
	// UnexpectedOnReset are the unexpected failures that involved both
	// ends of a reset or stalled link (counted in Unexpected too).
	UnexpectedOnReset int `json:"unexpected_on_reset"`
	// Unrelated are the unexpected failures of operations that involved a
	// member killed or fenced, whose errors blame only members that were
	// not (counted in Unexpected too): a kill does not excuse them.
	Unrelated int `json:"unrelated"`
	// Split counts members paused past DeadAfter that some members fenced
	// and others did not (or fenced members never paused): the group must
	// reach one verdict.
	Split int `json:"split"`
	// PausedFenced and PausedAlive count pauses past DeadAfter that the
	// group answered by fencing the member, or by none of its links taking
	// it for dead (informational: either is one verdict).
	PausedFenced int `json:"paused_fenced"`
	PausedAlive  int `json:"paused_alive"`
	// GoroutineGrowth and HeapGrowth are the largest growth of a member's
	// goroutines and heap in use from its Start to the end of its drained
	// traffic (informational: a leak grows them with every operation, so
	// compare runs of different lengths); GoroutinesMax the most seen then.
	GoroutineGrowth int   `json:"goroutine_growth"`
	HeapGrowth      int64 `json:"heap_growth_bytes"`
	GoroutinesMax   int   `json:"goroutines_max"`

	Problems     []string `json:"problems,omitempty"` // the first maxProblems
	MoreProblems int      `json:"more_problems,omitempty"`
}

func newReport(o Options) *Report {
	rep := &Report{Seed: o.Seed, Members: o.Members, Transport: o.Transport, FaultSet: slices.Clone(o.Faults),
		Ops: map[string]*OpCounts{}, Calls: map[string]uint64{}, Faults: map[string]int{}}
	for _, k := range allOps {
		rep.op(k)
	}
	for _, f := range allFaults {
		rep.Faults[f] = 0
	}
	faults := strings.Join(o.Faults, ",")
	if faults == "" {
		faults = "none"
	}
	rep.Reproduce = fmt.Sprintf("rrefgen soak -n %d -transport %s -faults %s -seed %d -round %v -clients %d -deadline %v -dead-after %v",
		o.Members, o.Transport, faults, o.Seed, o.RoundTraffic, o.Clients, o.OpDeadline, o.DeadAfter)
	if o.Rounds > 0 {
		rep.Reproduce += fmt.Sprintf(" -rounds %d", o.Rounds)
	} else {
		rep.Reproduce += fmt.Sprintf(" -d %v", o.Duration)
	}
	if o.FirstRound > 1 {
		rep.Reproduce += fmt.Sprintf(" -from %d", o.FirstRound)
	}
	return rep
}

func (r *Report) op(kind string) *OpCounts {
	oc := r.Ops[kind]
	if oc == nil {
		oc = &OpCounts{}
		r.Ops[kind] = oc
	}
	return oc
}

// A problem's text is cut to its first lines: a LeakError lists every
// reference, thousands after a broken link, and the head tells the story.
const (
	problemLines = 12
	problemChars = 4096
)

func (r *Report) addProblem(s string) {
	if lines := strings.Split(s, "\n"); len(lines) > problemLines {
		s = strings.Join(lines[:problemLines], "\n") + fmt.Sprintf("\n... (%d more lines)", len(lines)-problemLines)
	}
	if len(s) > problemChars {
		s = s[:problemChars] + " ..."
	}
	if len(r.Problems) < maxProblems {
		r.Problems = append(r.Problems, s)
	} else {
		r.MoreProblems++
	}
}

// OK reports whether the run passed: every counter that must be 0 is, and
// at least one round ran.
func (r *Report) OK() bool {
	return r.Rounds > 0 && r.Wrong == 0 && r.Hung == 0 && r.Leaked == 0 && r.Unsettled == 0 &&
		r.Unexpected == 0 && r.Illegal == 0 && r.Split == 0
}

// TotalOK is the number of operations that returned what they must.
func (r *Report) TotalOK() uint64 {
	var n uint64
	for _, oc := range r.Ops {
		n += oc.OK
	}
	return n
}

// tally is the part of a report a round's progress line shows.
type tally struct {
	ok                                                  uint64
	failedKill, stops, kills, resets, stalls            int
	wrong, hung, leaked, unsettled, unexpected, illegal int
}

func (r *Report) tally() tally {
	return tally{r.TotalOK(), r.FailedKill, r.Faults[FaultStop], r.Faults[FaultKill], r.Faults[FaultReset], r.Faults[FaultStall],
		r.Wrong, r.Hung, r.Leaked, r.Unsettled, r.Unexpected, r.Illegal}
}

// since describes what changed from an earlier tally (one round's share).
func (t tally) since(b tally) string {
	return fmt.Sprintf("%d ops ok, %d failed by kills; faults stop %d kill %d reset %d stall %d; wrong %d hung %d leaked %d unsettled %d unexpected %d illegal %d",
		t.ok-b.ok, t.failedKill-b.failedKill, t.stops-b.stops, t.kills-b.kills, t.resets-b.resets, t.stalls-b.stalls,
		t.wrong-b.wrong, t.hung-b.hung, t.leaked-b.leaked, t.unsettled-b.unsettled, t.unexpected-b.unexpected, t.illegal-b.illegal)
}

// WriteJSON writes the report as one indented JSON object.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteText writes the report as tables.
func (r *Report) WriteText(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	faults := strings.Join(r.FaultSet, ",")
	if faults == "" {
		faults = "none"
	}
	rounds := "rounds"
	if r.Rounds == 1 {
		rounds = "round"
	}
	fmt.Fprintf(w, "soak: seed %d, %d members, transport %s, faults %s: %d %s in %v",
		r.Seed, r.Members, r.Transport, faults, r.Rounds, rounds, r.Elapsed.Round(time.Second))
	if r.Interrupted {
		fmt.Fprint(w, " (interrupted)")
	}
	fmt.Fprintf(w, "\nreproduce: %s\n\n", r.Reproduce)

	fmt.Fprintln(tw, "operation\tran\tok\tfailed (kill)\twrong\thung\tunexpected\t")
	var tot OpCounts
	for _, k := range allOps {
		oc := r.op(k)
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t\n", k, oc.Started, oc.OK, oc.FailedKill, oc.Wrong, oc.Hung, oc.Unexpected)
		tot.Started += oc.Started
		tot.OK += oc.OK
		tot.FailedKill += oc.FailedKill
		tot.Wrong += oc.Wrong
		tot.Hung += oc.Hung
		tot.Unexpected += oc.Unexpected
	}
	fmt.Fprintf(tw, "total\t%d\t%d\t%d\t%d\t%d\t%d\t\n", tot.Started, tot.OK, tot.FailedKill, tot.Wrong, tot.Hung, tot.Unexpected)
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)

	fmt.Fprintln(tw, "runtime calls\tcount\t")
	for _, k := range allPrims {
		fmt.Fprintf(tw, "%s\t%d\t\n", k, r.Calls[k])
	}
	fmt.Fprintf(tw, "protocol messages sent\t%d\t\n", r.MessagesSent)
	tw.Flush()
	fmt.Fprintln(w)

	fmt.Fprintln(tw, "faults injected\tcount\t")
	for _, k := range allFaults {
		fmt.Fprintf(tw, "%s\t%d\t\n", k, r.Faults[k])
	}
	if r.Faults[FaultPause] > 0 {
		fmt.Fprintf(tw, "  pauses the group fenced\t%d\t\n", r.PausedFenced)
		fmt.Fprintf(tw, "  pauses no link took for dead\t%d\t\n", r.PausedAlive)
	}
	fmt.Fprintf(tw, "ops ok after a kill\t%d\t\n", r.OKAfterKill)
	fmt.Fprintf(tw, "holds reclaimed from the killed\t%d\t\n", r.HeldForDead)
	fmt.Fprintf(tw, "stale holds (live placer)\t%d\t\n", r.HeldForLive)
	fmt.Fprintf(tw, "messages refused by cores\t%d\t\n", r.BadInput)
	fmt.Fprintf(tw, "member goroutines after traffic, most\t%d\t\n", r.GoroutinesMax)
	fmt.Fprintf(tw, "  largest growth from Start\t%d\t\n", r.GoroutineGrowth)
	fmt.Fprintf(tw, "member heap growth from Start, largest\t%d KiB\t\n", r.HeapGrowth/1024)
	tw.Flush()
	fmt.Fprintln(w)

	fmt.Fprintln(tw, "must be 0\tcount\t")
	fmt.Fprintf(tw, "wrong\t%d\t\n", r.Wrong)
	fmt.Fprintf(tw, "hung\t%d\t\n", r.Hung)
	fmt.Fprintf(tw, "leaked\t%d\t\n", r.Leaked)
	fmt.Fprintf(tw, "unsettled shutdowns\t%d\t\n", r.Unsettled)
	fmt.Fprintf(tw, "failed unexpectedly\t%d\t\n", r.Unexpected)
	if r.UnexpectedOnReset > 0 {
		fmt.Fprintf(tw, "  of which on a reset or stalled link\t%d\t\n", r.UnexpectedOnReset)
	}
	if r.Unrelated > 0 {
		fmt.Fprintf(tw, "  of which beside a kill, blaming no member killed\t%d\t\n", r.Unrelated)
	}
	fmt.Fprintf(tw, "illegal transitions\t%d\t\n", r.Illegal)
	fmt.Fprintf(tw, "split verdicts on a pause\t%d\t\n", r.Split)
	tw.Flush()

	if len(r.Problems) > 0 {
		fmt.Fprintln(w, "\nproblems:")
		for _, p := range r.Problems {
			fmt.Fprintln(w, "  "+strings.ReplaceAll(p, "\n", "\n    "))
		}
		if r.MoreProblems > 0 {
			fmt.Fprintf(w, "  ... and %d more\n", r.MoreProblems)
		}
	}
	verdict := "PASS"
	if !r.OK() {
		verdict = "FAIL"
	}
	_, err := fmt.Fprintf(w, "\n%s\n", verdict)
	return err
}
