// Package core is the pure RRef protocol: one Core per worker, with no
// goroutines, sockets or clocks inside. Inputs are user actions (create,
// remote, call, pass, fetch, release), delivered messages and failure
// notices; outputs accumulate in a Ready that the driver takes: messages to
// send, user functions to run, fetch and call results, values freed.
//
// Every protocol state lives in a generated machine (generated/rref): the
// owner's view of each fork (Fork), each OwnerRRef (Owner), each UserRRef
// (User) and each child a parent has pinned (ChildPin). Counters beside them
// (known forks, local handles, pinned children, outstanding fetches) are
// tallies of those machines, never independent flags.
//
// Where G1 and G2 are enforced:
//   - G1: a released UserRRef sends exactly one UserDelete, from the single
//     transition draining -> deleted (see maybeDrain).
//   - G2: a UserRRef that forks a child pins it (ChildPin) and cannot leave
//     draining while any pin is pending; a pin is released only by the child's
//     ChildAccept, which the child sends only after the owner's ForkAck.
//     The creator's release waits for RemoteRet the same way (pending_released).
//
// Ids are capabilities. An RRef or fork id is its minting worker and 64 bits
// from that worker's CSPRNG (see New and WithIDSeed), so a worker that was
// never given a reference cannot name it, and knowing the id is the right to
// use it, as a Cap'n Proto sturdy ref or a Ray object id is. The owner checks
// the rest itself, since a member may be hostile:
//   - it hands a value to whoever names its RRef (a fetch may overtake the
//     fetcher's fork request, so the fork need not be known yet), and a fetch
//     naming an RRef it does not hold is answered deleted or lost, never with
//     data (one not yet created waits for its creator's RemoteCall, the only
//     message that creates it); a fetch through a fork another worker holds
//     is refused;
//   - a fork request, delete or fetch naming a fork another worker holds is
//     refused, and the request (and fetch) is answered, so that the real
//     child of a squatted fork id is lost rather than pending forever. Only
//     a worker that minted a fork id or was handed the reference (a child
//     learns its parent's fork id) can know it, and such a worker can keep
//     the value alive by its own reference anyway. A creator's fork is its
//     creator's whoever asked first: its RemoteCall proves it;
//   - what a peer makes it keep for values whose RemoteCall has not arrived
//     is bounded per peer (DefaultPendingPerPeer) and expires after
//     DefaultPendingTicks calls of Tick, the one input that measures time.
//
// Handle, call and fetch ids are local counters: they never confer a right.
//
// A Core is not safe for concurrent use; the agent serialises its inputs.
package core

import (
	"errors"
	"fmt"
	"time"

	"github.com/rrefkit/rref/generated/rref"
)

// WorkerID, RRefID and ForkID are the generated wire types.
type (
	WorkerID = rref.WorkerID
	RRefID   = rref.RRefID
	ForkID   = rref.ForkID
)

// HandleID names one reference the program holds on this worker: an owner's
// local handle or a UserRRef. It is local to the Core and never travels.
type HandleID uint64

// ErrorKind says why a fetch or call failed.
type ErrorKind = rref.ErrorKind

// Errors returned for API misuse and refused input, matched with errors.Is.
var (
	ErrUnknownHandle = errors.New("core: unknown or released handle")
	ErrHandleLost    = errors.New("core: handle is lost or its owner failed")
	ErrPeerDead      = errors.New("core: peer is dead")
	ErrBadInput      = errors.New("core: bad input")
	// ErrForkHeld: a message names a fork another worker holds (a squatted
	// or forged fork id). Always a BadInputError.
	ErrForkHeld = errors.New("core: fork is held by another worker")
	// ErrPendingLimit: a peer already has its bound of additions to records
	// awaiting their RemoteCall. Always a BadInputError.
	ErrPendingLimit = errors.New("core: too many records for values not yet created")
)

// BadInputError describes a message that was refused without changing state
// (beyond a refusal sent back, so that an honest sender is not left waiting).
type BadInputError struct {
	From WorkerID
	Code rref.Code
	Why  string
	Err  error // ErrForkHeld, ErrPendingLimit, or nil
	// FromName names From, when the core was given names (WithNames).
	FromName string
}

func (e *BadInputError) Error() string {
	from := e.FromName
	if from == "" {
		from = fmt.Sprintf("worker %d", e.From)
	}
	return fmt.Sprintf("core: bad %v from %s: %s", e.Code, from, e.Why)
}

func (e *BadInputError) Is(target error) bool { return target == ErrBadInput }

func (e *BadInputError) Unwrap() error { return e.Err }

// Envelope is a message with its route.
type Envelope struct {
	From, To WorkerID
	Msg      rref.Message
}

// RunKind says which user action a Run answers.
type RunKind uint8

const (
	RunRemote RunKind = iota + 1 // create a value: answer with CompleteRemote
	RunCall                      // a plain call: answer with Return
)

// Run asks the driver to run a user function. It is emitted only once every
// RRef among its arguments is confirmed by the owner (or refused).
type Run struct {
	Kind    RunKind
	From    WorkerID // the caller
	CallID  uint64   // RunCall: pass back to Return
	RRef    RRefID   // RunRemote: pass back to CompleteRemote
	Fn      string
	Args    []byte
	Handles []HandleID // the RRefs among the arguments, now held by this worker
	// Timeout is how long the caller still waited when it sent the call
	// (RunCall; 0: no deadline): the driver ends the function's context
	// after it.
	Timeout time.Duration
	// Cancelled: the caller cancelled the call before it could run (its
	// RRef arguments were still being confirmed). Answer it at once.
	Cancelled bool
	// PastDeadline: with Cancelled, it was the caller's deadline that
	// passed, not its context that was cancelled.
	PastDeadline bool
	// Meta is the call's (or Remote's) metadata as it came: the core
	// carries it and never reads it. Its values alias the frame as Args
	// does.
	Meta []rref.MetaEntry
}

// Failure is why a function failed, as it crosses the wire: its kind, the
// application's code for a user error (empty when none) and a message.
// The zero Failure is success.
type Failure struct {
	Kind    ErrorKind
	Code    string
	Message string
}

// Cancel tells the driver that the caller of a call it runs no longer
// waits for it (CallCancel): the function's context should end.
type Cancel struct {
	From   WorkerID
	CallID uint64
	// Deadline: the caller's deadline passed, rather than its context
	// being cancelled; the function's context ends as past its deadline.
	Deadline bool
}

// FetchResult completes a Fetch.
type FetchResult struct {
	FetchID uint64
	Handle  HandleID
	Value   []byte
	Err     ErrorKind // ErrorKindNone on success
	Message string    // the stored function error, for ErrorKindUser
	Code    string    // its application code, if any
}

// CallResult completes a Call.
type CallResult struct {
	CallID  uint64
	Result  []byte
	Handles []HandleID // RRefs returned, usable at once
	Err     ErrorKind
	Message string
	Code    string // the application's code of a user error, if any
}

// Freed reports a value the owner freed: no reference to it remains anywhere.
type Freed struct {
	RRef  RRefID
	Value []byte
}

// Ready is everything a Core produced since the last TakeReady.
type Ready struct {
	Messages []Envelope
	Runs     []Run
	Fetches  []FetchResult
	Calls    []CallResult
	Cancels  []Cancel
	Freed    []Freed
	// Errors lists bad input refused and any illegal transition a machine
	// reported; a correct run produces none of the latter.
	Errors []error
	// DeferredAcks lists the values whose creator's RemoteRet the core
	// held back (WithDeferredAcks): the driver calls FlushAck for each
	// soon, whether or not a fetch took the ACK along meanwhile.
	DeferredAcks []RRefID
}

// Reset empties r and keeps its slices' memory for reuse, except that of a
// large burst (such as a peer's failure), which should not stay pinned.
func (r *Ready) Reset() {
	r.Messages = emptied(r.Messages)
	r.Runs = emptied(r.Runs)
	r.Fetches = emptied(r.Fetches)
	r.Calls = emptied(r.Calls)
	r.Cancels = emptied(r.Cancels)
	r.Freed = emptied(r.Freed)
	r.Errors = emptied(r.Errors)
	r.DeferredAcks = emptied(r.DeferredAcks)
}

func emptied[T any](s []T) []T {
	if len(s) == 0 && cap(s) <= maxKeptReady {
		return s
	}
	if cap(s) > maxKeptReady {
		return nil
	}
	clear(s) // drop references to messages and values for the collector
	return s[:0]
}

const maxKeptReady = 256

// Empty reports whether r holds nothing.
func (r *Ready) Empty() bool {
	return len(r.Messages) == 0 && len(r.Runs) == 0 && len(r.Fetches) == 0 && len(r.Calls) == 0 &&
		len(r.Cancels) == 0 && len(r.Freed) == 0 && len(r.Errors) == 0 && len(r.DeferredAcks) == 0
}

// Counters are the debug counters PyTorch exposes, plus our own.
type Counters struct {
	Owners          int // OwnerRRef records, also ones never passed on or awaiting creation
	Forks           int // known forks over all owners
	PendingUsers    int // UserRRefs not yet confirmed
	PendingChildren int // children pinned and not yet answered
	PendingMessages int // fetches and calls awaiting their reply
	Duplicates      int // control messages ignored as duplicates
	BadInput        int // messages refused as malformed or inconsistent
	Illegal         int // illegal transitions reported by a machine: always 0 in a correct core
	Awaiting        int // OwnerRRef records awaiting their RemoteCall (counted in Owners too)
	Charged         int // additions to those records, over all peers (see DefaultPendingPerPeer)
	Expired         int // records given up by Tick, their RemoteCall never arrived
}

// Clean reports whether nothing protocol-related is left (L2).
func (c Counters) Clean() bool {
	return c.Owners == 0 && c.Forks == 0 && c.PendingUsers == 0 && c.PendingChildren == 0
}
