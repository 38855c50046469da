package worker

import (
	"context"
	"fmt"
	"reflect"
	"runtime"
	"time"

	"github.com/rrefkit/rref/generated/rref"
	"github.com/rrefkit/rref/runtime/core"
)

// RefsSnapshot is what one member holds at one moment: every value it owns
// and every reference it holds, each with its protocol state. Refs takes
// it; runtime/observe serves it, and joins members' snapshots into the
// group's picture. Ids are the creator's name and the 16 hex digits of the
// id's number, so that snapshots of several members join on them.
type RefsSnapshot struct {
	Member string    `json:"member"`
	Taken  time.Time `json:"taken"`
	// Sites says this member records where, when and as what its
	// references were made (Config.RecordRefSites); without it references
	// carry no site, age or type of their own.
	Sites      bool          `json:"sites"`
	Values     []OwnedValue  `json:"values"`
	References []HeldRefInfo `json:"references"`
}

// ValueState is where an owned value is in its life.
type ValueState string

const (
	// ValueAwaiting: a fork request, fetch or delete overtook the call
	// that creates the value; its record waits for that call.
	ValueAwaiting ValueState = "awaiting"
	ValueCreating ValueState = "creating" // its function still runs
	ValueReady    ValueState = "ready"    // the value is here
	ValueFailed   ValueState = "failed"   // its function failed; fetches get its error
)

// RefState is where a reference is in its life, as its holder sees it.
type RefState string

const (
	// RefAwaiting: the owner has not yet confirmed it (a Remote's
	// reference, or a copy received from another user).
	RefAwaiting  RefState = "awaiting"
	RefConfirmed RefState = "confirmed" // confirmed by the owner
	// RefPinned: copies lent to other members wait for the owner's answer,
	// and keep this reference's delete from leaving (the protocol's G2).
	RefPinned RefState = "pinned"
	// RefReleasing: released, its delete waits for fetches to return.
	RefReleasing RefState = "releasing"
	RefOrphaned  RefState = "orphaned" // its owner failed: ToHere fails with ErrOwnerFailed
	// RefCut: cut off from its value (the owner refused it: the value was
	// freed or never created); ToHere fails with ErrLost.
	RefCut RefState = "cut"
)

// OwnedValue is a value this member owns. Copies of it in flight between
// other members are pinned by the references that lent them, on their
// holders (HeldRefInfo.Lent): the group's view (runtime/observe, rrefgen
// refs) sums them per value.
type OwnedValue struct {
	ID    string     `json:"id"`
	Type  string     `json:"type,omitempty"` // its Go type, when known here
	Size  int        `json:"size"`           // bytes encoded; -1 until created, and when its function failed
	State ValueState `json:"state"`
	// Failure is the error its function returned; Function names the
	// function still making it.
	Failure  string `json:"failure,omitempty"`
	Function string `json:"function,omitempty"`
	// Age is how long it has existed here (since its function began);
	// 0 while it awaits its creating call.
	Age time.Duration `json:"age_ns,omitempty"`
	// Program counts this member's own handles to it; Forks are the
	// references the owner knows, each with its holder, this member's
	// own among them (a Remote to itself, a copy passed to itself).
	Program        int         `json:"program"`
	Forks          []KnownFork `json:"forks"`
	WaitingFetches int         `json:"waiting_fetches,omitempty"` // fetches waiting for it to be created
	// Site is where this member's program made it (file:line of NewRRef,
	// or of a Remote to itself), while sites are recorded.
	Site string `json:"site,omitempty"`
}

// KnownFork is a reference to a value that its owner counts.
type KnownFork struct {
	ID     string `json:"id"`
	Holder string `json:"holder"`
}

// HeldRefInfo is a reference this member holds to a value on another
// member (or one cut off from its value).
type HeldRefInfo struct {
	Value string `json:"value"` // the value's id
	Fork  string `json:"fork"`  // this reference's own id
	// Parent is the reference it was copied from (the value's id when the
	// owner handed it out; empty for the reference a Remote made here),
	// and From the member that sent it.
	Parent string   `json:"parent,omitempty"`
	From   string   `json:"from,omitempty"`
	Owner  string   `json:"owner"`
	State  RefState `json:"state"`
	// Held: the program holds it. A released reference stays listed while
	// its delete waits for lent copies or fetches.
	Held bool `json:"held"`
	// Cut is why it is cut off from its value: "lost", "owner_failed" or
	// "bad_request" (the same reference received twice).
	Cut         string     `json:"cut,omitempty"`
	TimedOut    bool       `json:"timed_out,omitempty"`    // its Remote was not confirmed within Config.RemoteTimeout
	Fetching    int        `json:"fetching,omitempty"`     // fetches sent and not yet answered
	WaitingRuns int        `json:"waiting_runs,omitempty"` // functions here waiting for its confirmation
	Lent        []LentCopy `json:"lent,omitempty"`         // copies lent and pinned until the owner answers them
	// Type, Site and Age, while sites are recorded: the Go type it was
	// bound as, where it was made (Remote, or the Clone's original), and
	// how long ago it was bound here.
	Type string        `json:"type,omitempty"`
	Site string        `json:"site,omitempty"`
	Age  time.Duration `json:"age_ns,omitempty"`
}

// LentCopy is a copy of a reference lent to another member, pinned until
// the owner has answered it.
type LentCopy struct {
	Fork string `json:"fork"`
	To   string `json:"to"`
}

// valueNote is what the worker notes of a value it owns.
type valueNote struct {
	typ  reflect.Type  // nil when unknown (a Remote whose function failed)
	born time.Duration // since monoEpoch
}

// refNote is what the worker notes of a reference its program holds,
// while it records reference sites.
type refNote struct {
	site uintptr // the return address of the call that made it; 0: none
	born time.Duration
	typ  reflect.Type
}

// refNotesPruneFloor is the fewest notes at which released handles' notes
// are dropped: a program's handful of references never pays for a sweep.
const refNotesPruneFloor = 1024

// callerSite is where the program called the API function calling this
// (Remote, NewRRef), when sites are recorded: a return address, resolved
// to file:line only when a snapshot shows it.
func (w *Worker) callerSite() uintptr {
	if !w.recordSites.Load() {
		return 0
	}
	var pc [1]uintptr
	// Skip runtime.Callers, callerSite and the API function.
	if runtime.Callers(3, pc[:]) == 0 {
		return 0
	}
	return pc[0]
}

// noteRef notes handle h (w.mu held). Handles are never released through
// here, so notes of released handles are dropped when the map has
// doubled since the last sweep: amortized, each note costs one more look
// at the core.
func (w *Worker) noteRef(h core.HandleID, n refNote) {
	if w.refNotes == nil {
		w.refNotes = map[core.HandleID]refNote{}
		w.refNotesPruneAt = refNotesPruneFloor
	}
	w.refNotes[h] = n
	if len(w.refNotes) < w.refNotesPruneAt {
		return
	}
	for h := range w.refNotes {
		if !w.c.Handle(h).Exists {
			delete(w.refNotes, h)
		}
	}
	w.refNotesPruneAt = max(2*len(w.refNotes), refNotesPruneFloor)
}

// Refs takes a snapshot of every value this member owns and every
// reference it holds. The core's records are copied under the worker's
// lock, and described after it is released; it calls nothing of the
// program's. A closed worker still shows what it held when it closed.
func (w *Worker) Refs(ctx context.Context) (RefsSnapshot, error) {
	if err := ctx.Err(); err != nil {
		return RefsSnapshot{}, fmt.Errorf("worker: Refs on %s: %w", w.name, err)
	}
	w.mu.Lock()
	inv := w.c.Inventory()
	now := time.Since(monoEpoch)
	values := make([]valueNote, len(inv.Values))
	making := make([]running, len(inv.Values))
	valueSites := make([]uintptr, len(inv.Values))
	for i, v := range inv.Values {
		values[i], making[i] = w.values[v.RRef], w.remotes[v.RRef]
		for _, h := range v.Handles {
			if s := w.refNotes[h].site; s != 0 {
				valueSites[i] = s
				break
			}
		}
	}
	notes := make([]refNote, len(inv.References))
	for i, r := range inv.References {
		if r.Handle != 0 {
			notes[i] = w.refNotes[r.Handle]
		}
	}
	sites := w.recordSites.Load()
	w.mu.Unlock()

	s := RefsSnapshot{Member: w.name, Taken: time.Now(), Sites: sites,
		Values: make([]OwnedValue, 0, len(inv.Values)), References: make([]HeldRefInfo, 0, len(inv.References))}
	resolve := siteResolver()
	for i, v := range inv.Values {
		ov := OwnedValue{ID: w.fullID(v.RRef.Worker, v.RRef.Local), Size: -1, Program: len(v.Handles),
			Forks: make([]KnownFork, 0, len(v.Forks)), WaitingFetches: v.Waiting, Site: resolve(valueSites[i])}
		switch {
		case v.State == rref.OwnerAwaiting:
			ov.State = ValueAwaiting
		case v.State == rref.OwnerPending:
			ov.State = ValueCreating
			name, _, _ := splitWireName(making[i].fn)
			ov.Function = name
			ov.Age = ageOf(now, making[i].since)
		case v.Failed != rref.ErrorKindNone:
			ov.State, ov.Failure = ValueFailed, v.Failed.String()
			if v.FailMsg != "" {
				ov.Failure += ": " + v.FailMsg
			}
		default:
			ov.State, ov.Size = ValueReady, len(v.Value)
		}
		if ov.State != ValueCreating {
			ov.Age = ageOf(now, values[i].born)
		}
		if t := values[i].typ; t != nil {
			ov.Type = t.String()
		}
		for _, f := range v.Forks {
			ov.Forks = append(ov.Forks, KnownFork{ID: w.fullID(f.Fork.Worker, f.Fork.Local), Holder: w.nameOf(f.Holder)})
		}
		s.Values = append(s.Values, ov)
	}
	lent := map[core.ForkID][]LentCopy{}
	for _, p := range inv.Pins {
		lent[p.Parent] = append(lent[p.Parent], LentCopy{Fork: w.fullID(p.Child.Worker, p.Child.Local), To: w.nameOf(p.To)})
	}
	for i, r := range inv.References {
		ri := HeldRefInfo{Value: w.fullID(r.RRef.Worker, r.RRef.Local), Fork: w.fullID(r.Fork.Worker, r.Fork.Local),
			Owner: w.nameOf(r.Owner), State: refStateOf(r), Held: r.Handle != 0, TimedOut: r.TimedOut,
			Fetching: r.Fetching, WaitingRuns: r.Runs, Lent: lent[r.Fork]}
		if r.Parent != (core.ForkID{}) {
			ri.Parent = w.fullID(r.Parent.Worker, r.Parent.Local)
		}
		if r.ParentWorker != 0 && r.Parent != (core.ForkID{}) {
			ri.From = w.nameOf(r.ParentWorker)
		}
		if r.Cut != rref.ErrorKindNone {
			ri.Cut = r.Cut.String()
		}
		if n := notes[i]; n.typ != nil {
			ri.Type, ri.Site, ri.Age = n.typ.String(), resolve(n.site), ageOf(now, n.born)
		}
		s.References = append(s.References, ri)
	}
	return s, nil
}

// refStateOf is a reference's state as Refs shows it: why it is cut off,
// first; then whether the owner has confirmed it, whether lent copies pin
// it, and whether it is released.
func refStateOf(r core.ReferenceEntry) RefState {
	switch {
	case r.Cut == rref.ErrorKindOwnerFailed:
		return RefOrphaned
	case r.Cut != rref.ErrorKindNone:
		return RefCut
	case r.State == rref.UserPending || r.State == rref.UserPendingReleased:
		return RefAwaiting
	case r.Pinned > 0:
		return RefPinned
	case r.State == rref.UserConfirmed:
		return RefConfirmed
	}
	return RefReleasing // draining, or deleted with functions still waiting on it
}

// fullID names an id (a value's or a fork's) by its minting member and
// its whole number: unique in the group, so snapshots join on it.
func (w *Worker) fullID(minter core.WorkerID, local uint64) string {
	return fmt.Sprintf("%s:%016x", w.nameOf(minter), local)
}

// ageOf is how long ago born was, at now (both since monoEpoch); 0 for a
// time not noted.
func ageOf(now, born time.Duration) time.Duration {
	if born == 0 {
		return 0
	}
	return now - born
}

// siteResolver resolves return addresses to file:line, each once.
func siteResolver() func(uintptr) string {
	seen := map[uintptr]string{}
	return func(pc uintptr) string {
		if pc == 0 {
			return ""
		}
		if s, ok := seen[pc]; ok {
			return s
		}
		f, _ := runtime.CallersFrames([]uintptr{pc}).Next()
		s := fmt.Sprintf("%s:%d", f.File, f.Line)
		seen[pc] = s
		return s
	}
}
