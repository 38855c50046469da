package core

import (
	"cmp"
	crand "crypto/rand"
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/rrefkit/rref/generated/rref"
	"github.com/rrefkit/rref/genrt"
)

// DefaultTombstones bounds how many freed RRef ids an owner remembers.
const DefaultTombstones = 1 << 16

// DefaultPendingPerPeer bounds what one peer may make an owner keep for
// values whose RemoteCall has not arrived: each fork request, fetch or
// arriving handle that adds to such a record counts one, until the value is
// created or given up. A peer's messages overtake a RemoteCall only for the
// values its creators have in flight, so an honest peer stays far below this;
// a hostile one holds at most this many (300 to 800 bytes each, as
// TestForgedPendingRecordsBounded measures: at most about 13 MiB) before its
// further such messages are refused.
const DefaultPendingPerPeer = 1 << 14

// DefaultEarlyCancels bounds how many cancels of calls not yet arrived a
// core remembers (the oldest are forgotten first). A cancel overtakes its
// call only while both are in flight between two workers, so an honest
// peer needs a handful; a hostile one fills at most this many (24 bytes
// each).
const DefaultEarlyCancels = 1 << 10

// callKey names a call a peer made: its worker and its call id.
type callKey struct {
	Worker WorkerID // who called
	Local  uint64   // its call id
}

// DefaultPendingTicks is how many Ticks a record awaits its RemoteCall before
// it is given up as never created. The worker ticks every twentieth of its
// call timeout, so 40 ticks are two call timeouts: whoever sent a message
// that waits on the record has given up on it by then.
const DefaultPendingTicks = 40

type forkRec struct {
	state  rref.ForkState
	holder WorkerID
}

type waitingFetch struct {
	from    WorkerID // self for a local fetch
	fetchID uint64
	handle  HandleID // local fetches only
	fork    ForkID   // the fork it came through: remote fetches only
}

type ownerRec struct {
	state   rref.OwnerState
	value   []byte
	err     ErrorKind
	errCode string
	errMsg  string
	forks   idMap[ForkID, forkRec] // every fork the owner has heard of, deleted ones included
	known   int                    // forks in state known
	local   int                    // local handles on the owner
	waiting []waitingFetch
	charges []charge // awaiting only: what each peer added, refunded when it settles
	// creator is the creator's fork, recorded when RemoteRets are held
	// back (WithDeferredAcks): every answer to a fetch through it, by its
	// holder while it is known, confirms it, so that a repeated fetch's
	// answer, overtaking the first, cannot carry the ACK off alone.
	// ackHeld: its RemoteRet is held back (FlushAck sends it).
	creator ForkID
	ackHeld bool
}

// charge is what one peer added to a record awaiting its RemoteCall.
type charge struct {
	peer WorkerID
	n    int
}

type userRec struct {
	state    rref.UserState
	owner    WorkerID
	rref     RRefID
	fork     ForkID
	parent   ForkID
	parentW  WorkerID
	handle   HandleID
	pinned   int // pending ChildPins whose parent is this fork
	fetching int // fetches sent and not answered
	timedOut bool
	runs     []*pendingRun // runs waiting for this fork's confirmation
}

type pinRec struct {
	state  rref.ChildPinState
	rref   RRefID
	parent ForkID // the parent's own fork on this worker
	child  WorkerID
	owner  WorkerID
}

type handleKind uint8

const (
	handleOwner    handleKind = iota + 1 // a local handle on the owner
	handleSelfFork                       // the owner's handle from a remote to itself (fork == rref)
	handleUser                           // a UserRRef
	handleLost                           // arrived for a value already freed or never created
)

type handleRec struct {
	kind  handleKind
	rref  RRefID
	fork  ForkID // user and self-fork handles
	lost  ErrorKind
	owner WorkerID // lost handles: the value's owner, named when the handle is passed on
}

type pendingRun struct {
	run     Run
	waiting int
}

type fetchRec struct {
	handle HandleID
	fork   ForkID
}

type tombstone struct {
	kind ErrorKind // deleted, or lost when the value never existed
}

// Core is the protocol state of one worker.
type Core struct {
	self      WorkerID
	ids       *rand.ChaCha8 // the unguessable part of RRef and fork ids (copied on write: cow.go)
	drawn     uint64        // values drawn from ids: with the seed, its whole state
	nextLocal uint64        // handles, fetches and calls: never travel as a right

	owners  idMap[RRefID, *ownerRec]
	users   idMap[ForkID, *userRec]
	pins    idMap[ForkID, *pinRec]
	handles map[HandleID]*handleRec
	fetches map[uint64]fetchRec
	calls   map[uint64]WorkerID
	dead    deadSet

	tombs bounded[RRefID, tombstone] // freed or never-created values
	// earlyCancels remembers CallCancels whose Call has not arrived (a
	// cancel may overtake its call), so that the call runs cancelled; the
	// value says whether it was the caller's deadline (CallCancel.deadline).
	earlyCancels bounded[callKey, bool]
	goneForks    bounded[ForkID, struct{}] // recently deleted forks, so a resend cannot revive one
	tombLimit    int

	// Records awaiting their RemoteCall, with the tick each began in, and
	// what each peer has added to them (see DefaultPendingPerPeer).
	awaiting     idMap[RRefID, uint64]
	charged      map[WorkerID]int
	epoch        uint64 // Ticks so far
	pendingLimit int
	pendingTicks uint64
	seeded       bool
	expired      int
	deferAcks    bool // WithDeferredAcks

	// shared holds the tables this core shares with a clone, copied on
	// their first write (cow.go); digests the tables' state digests, those
	// in digested valid (StateDigest). Held by value: a clone copies them
	// with the struct, and no allocation is shared.
	shared   table
	digested table
	digests  [segments]Digest

	dupes, bad, illegals int
	ready                Ready
	// Scratch, not state, made on first use: a clone (an explorer makes
	// one per step) carries neither.
	dec  *rref.Decoder // DeliverFrame's, reused: Deliver keeps no message
	msgs *msgPools     // sent messages passed back by TakeReadyInto
	// names names workers in the core's error texts (WithNames); nil:
	// "worker N".
	names func(WorkerID) string
}

// Option configures a Core.
type Option func(*Core)

// WithTombstones bounds the freed-value memory (at least 1).
func WithTombstones(n int) Option {
	return func(c *Core) {
		if n > 0 {
			c.tombLimit = n
		}
	}
}

// WithIDSeed makes the ids the core mints a function of seed: the same seed
// and the same inputs give the same ids, so a test or an explorer can replay
// a run and hash its states. Anyone who knows the seed can compute the ids,
// so a real group must not use it: without it, New seeds from crypto/rand.
func WithIDSeed(seed [32]byte) Option {
	return func(c *Core) {
		c.ids.Seed(seed)
		c.seeded = true
	}
}

// WithPendingLimit bounds what one peer may add to records awaiting their
// RemoteCall (at least 1; DefaultPendingPerPeer otherwise).
func WithPendingLimit(n int) Option {
	return func(c *Core) {
		if n > 0 {
			c.pendingLimit = n
		}
	}
}

// WithPendingTicks sets how many Ticks a record awaits its RemoteCall before
// it is given up (at least 1; DefaultPendingTicks otherwise).
func WithPendingTicks(n int) Option {
	return func(c *Core) {
		if n > 0 {
			c.pendingTicks = uint64(n)
		}
	}
}

// WithNames has the core name workers in its errors by name(id), the
// driver's names for them, instead of "worker N": the core knows workers
// by index only, and a reader knows them by name.
func WithNames(name func(WorkerID) string) Option {
	return func(c *Core) { c.names = name }
}

// who names worker id in an error text.
func (c *Core) who(id WorkerID) string {
	if c.names != nil {
		return c.names(id)
	}
	return fmt.Sprintf("worker %d", id)
}

// WithDeferredAcks lets the core hold back the RemoteRet that confirms a
// creator's fork, so that the answer to the creator's fetch confirms it
// instead (FetchRet.Confirms): a Remote followed by ToHere then costs the
// owner one answer and the creator one message to handle, not two. Each
// RemoteRet held back is listed in Ready.DeferredAcks, and the driver
// must call FlushAck for it soon after (the worker does after 200 us):
// until then the creator's fork stays unconfirmed, and its delete waits.
func WithDeferredAcks() Option {
	return func(c *Core) { c.deferAcks = true }
}

// New returns the core of worker self. Unless WithIDSeed is given, the ids
// it mints come from a ChaCha8 generator seeded with 32 bytes from
// crypto/rand, read once here: minting then costs nanoseconds, not a
// system call, and the core takes no other outside input.
func New(self WorkerID, opts ...Option) *Core {
	c := &Core{
		self:         self,
		ids:          new(rand.ChaCha8),
		handles:      map[HandleID]*handleRec{},
		fetches:      map[uint64]fetchRec{},
		calls:        map[uint64]WorkerID{},
		charged:      map[WorkerID]int{},
		tombLimit:    DefaultTombstones,
		pendingLimit: DefaultPendingPerPeer,
		pendingTicks: DefaultPendingTicks,
	}
	for _, o := range opts {
		o(c)
	}
	if !c.seeded {
		var seed [32]byte
		crand.Read(seed[:]) // never fails: the runtime aborts the process first
		c.ids.Seed(seed)
	}
	c.tombs = newBounded[RRefID, tombstone](c.tombLimit)
	c.goneForks = newBounded[ForkID, struct{}](c.tombLimit)
	c.earlyCancels = newBounded[callKey, bool](DefaultEarlyCancels)
	return c
}

// Self is this core's worker.
func (c *Core) Self() WorkerID { return c.self }

// TakeReady returns everything produced since the last call and resets it.
func (c *Core) TakeReady() Ready {
	r := c.ready
	c.ready = Ready{}
	return r
}

// TakeReadyInto moves everything produced since the last call into *r and
// continues with the slices *r held, emptied. A caller that passes back each
// Ready it has acted on (and keeps nothing of its slices) lets the core
// produce without allocating, as raft's Advance does. The messages in a
// Ready passed back are reused as well: to keep one beyond the call, set
// its envelope's Msg to nil first.
func (c *Core) TakeReadyInto(r *Ready) {
	for _, e := range r.Messages {
		if e.Msg != nil {
			c.poolsW().reclaim(e.Msg)
		}
	}
	r.Reset()
	// Field by field, and only what holds something: swapping the whole
	// struct cost a sixth of a control message's handling.
	takeInto(&c.ready.Messages, &r.Messages)
	takeInto(&c.ready.Runs, &r.Runs)
	takeInto(&c.ready.Fetches, &r.Fetches)
	takeInto(&c.ready.Calls, &r.Calls)
	takeInto(&c.ready.Cancels, &r.Cancels)
	takeInto(&c.ready.Freed, &r.Freed)
	takeInto(&c.ready.Errors, &r.Errors)
	takeInto(&c.ready.DeferredAcks, &r.DeferredAcks)
}

// takeInto moves what *from holds into *to, which is empty, and leaves
// *from with *to's memory.
func takeInto[T any](from, to *[]T) {
	if len(*from) > 0 {
		*from, *to = *to, *from
	}
}

// HasReady reports whether TakeReady would return anything.
func (c *Core) HasReady() bool { return !c.ready.Empty() }

func (c *Core) send(to WorkerID, m rref.Message) {
	if c.dead.has(to) {
		return // the network drops what is sent to the dead
	}
	c.ready.Messages = append(c.ready.Messages, Envelope{From: c.self, To: to, Msg: m})
}

// newID mints the unguessable part of an RRef or fork id: 64 bits from the
// core's CSPRNG, never 0 (so a zero id always means none) and never one this
// worker still records under its own name, as a value, tombstone, UserRRef,
// pin or deleted fork. Across workers ids are unique with the probability of
// 64 random bits: a repeat takes about 2^32 ids minted by one worker.
func (c *Core) newID() uint64 {
	for {
		x := c.idsW().Uint64()
		c.drawn++
		if x != 0 && !c.idTaken(x) {
			return x
		}
	}
}

func (c *Core) idTaken(x uint64) bool {
	r, f := RRefID{Worker: c.self, Local: x}, ForkID{Worker: c.self, Local: x}
	if _, ok := c.owners.get(r); ok {
		return true
	}
	if _, ok := c.tombs.get(r); ok {
		return true
	}
	if _, ok := c.users.get(f); ok {
		return true
	}
	if _, ok := c.pins.get(f); ok {
		return true
	}
	return c.forkGone(f)
}

func (c *Core) newLocal() uint64 {
	c.nextLocal++
	return c.nextLocal
}

func asFork(id RRefID) ForkID { return ForkID{Worker: id.Worker, Local: id.Local} }

// illegalf records a transition the spec forbids: a core bug, never bad input,
// because every input is validated before a machine is stepped.
func (c *Core) illegal(err error) {
	c.illegals++
	c.ready.Errors = append(c.ready.Errors, err)
}

func (c *Core) refuse(from WorkerID, code rref.Code, format string, args ...any) error {
	return c.refuseErr(from, code, nil, format, args...)
}

// refuseErr is refuse with a cause errors.Is matches beside ErrBadInput.
func (c *Core) refuseErr(from WorkerID, code rref.Code, cause error, format string, args ...any) error {
	c.bad++
	err := &BadInputError{From: from, Code: code, Why: fmt.Sprintf(format, args...), Err: cause}
	if c.names != nil {
		err.FromName = c.names(from)
	}
	c.ready.Errors = append(c.ready.Errors, err)
	return err
}

// step applies event e to the machine whose state is *state with that
// machine's generated step function; an illegal transition is recorded and
// changes nothing.
func step[S, E any](c *Core, state *S, e E, stepFn func(S, E) (S, genrt.Outcome, error)) genrt.Outcome {
	next, out, err := stepFn(*state, e)
	if err != nil {
		c.illegal(err)
		return 0
	}
	*state = next
	return out
}

func (c *Core) stepFork(f *forkRec, e rref.ForkEvent) genrt.Outcome {
	return step(c, &f.state, e, rref.StepFork)
}

func (c *Core) stepOwner(o *ownerRec, e rref.OwnerEvent) genrt.Outcome {
	return step(c, &o.state, e, rref.StepOwner)
}

func (c *Core) stepUser(u *userRec, e rref.UserEvent) genrt.Outcome {
	return step(c, &u.state, e, rref.StepUser)
}

func (c *Core) stepPin(p *pinRec, e rref.ChildPinEvent) genrt.Outcome {
	return step(c, &p.state, e, rref.StepChildPin)
}

func (c *Core) tombstone(id RRefID, kind ErrorKind) { c.tombsW().add(id, tombstone{kind: kind}) }

// storeFork writes a fork back; a fork in a final state is dropped from its
// owner and remembered, boundedly, as gone, so memory follows live forks only.
func (c *Core) storeFork(o *ownerRec, id ForkID, f forkRec) {
	if !f.state.IsFinal() {
		o.forks.put(id, f)
		return
	}
	o.forks.del(id)
	c.goneForksW().add(id, struct{}{})
}

func (c *Core) forkGone(id ForkID) bool {
	_, ok := c.goneForks.get(id)
	return ok
}

func (c *Core) newHandle(h *handleRec) HandleID {
	id := HandleID(c.newLocal())
	c.handlesW()[id] = h
	return id
}

// ownerOf returns the owner record of id. With none, it says why: the
// tombstone's kind when the value is gone or can never exist, or
// ErrorKindNone when its RemoteCall may still arrive (see admit).
func (c *Core) ownerOf(id RRefID) (*ownerRec, ErrorKind) {
	if o := c.ownersW().at(id); o != nil {
		return o, rref.ErrorKindNone
	}
	if t, ok := c.tombs.get(id); ok {
		return nil, t.kind
	}
	if id.Worker == c.self {
		// Values this worker creates exist from the start; one without a
		// record was freed and its tombstone since forgotten, or never minted.
		return nil, rref.ErrorKindDeleted
	}
	if c.dead.has(id.Worker) {
		// Its creator died before its RemoteCall arrived: it never will.
		c.tombstone(id, rref.ErrorKindLost)
		return nil, rref.ErrorKindLost
	}
	return nil, rref.ErrorKindNone
}

// admit lets a message from worker from add to the record of a value whose
// RemoteCall has not arrived: o, awaiting, or nil when ownerOf found no
// record and the value may still be created, in which case an awaiting
// record is made. The addition is charged to from; one past from's bound is
// refused (ErrPendingLimit) and changes nothing. code and what describe the
// message for the refusal.
func (c *Core) admit(from WorkerID, id RRefID, o *ownerRec, code rref.Code, what string) (*ownerRec, error) {
	if c.charged[from] >= c.pendingLimit {
		return nil, c.refuseErr(from, code, ErrPendingLimit, "%s for %v, not yet created: %d such records already", what, id, c.charged[from])
	}
	if o == nil {
		o = &ownerRec{state: rref.OwnerStart}
		if c.stepOwner(o, rref.OwnerOnAwait) != genrt.Moved {
			return nil, &BadInputError{From: from, Code: code, Why: "no record can await " + fmtRRef(id)}
		}
		c.ownersW().put(id, o)
		c.awaitingW().put(id, c.epoch)
	}
	c.chargedW()[from]++
	// Kept sorted by peer, so that equal records encode equally (AppendState).
	i, found := slices.BinarySearchFunc(o.charges, from, func(ch charge, p WorkerID) int { return cmp.Compare(ch.peer, p) })
	if found {
		o.charges[i].n++
	} else {
		o.charges = slices.Insert(o.charges, i, charge{peer: from, n: 1})
	}
	return o, nil
}

// settleAwait refunds what peers added to the record of id, which no longer
// awaits its RemoteCall: it was created or given up.
func (c *Core) settleAwait(id RRefID, o *ownerRec) {
	for _, ch := range o.charges {
		if charged := c.chargedW(); charged[ch.peer]-ch.n <= 0 {
			delete(charged, ch.peer)
		} else {
			charged[ch.peer] -= ch.n
		}
	}
	o.charges = nil
	c.awaitingW().del(id)
}

// maybeFree frees an owner's value once nothing refers to it.
func (c *Core) maybeFree(id RRefID, o *ownerRec) {
	if o.state != rref.OwnerReady || o.known > 0 || o.local > 0 {
		return
	}
	if c.stepOwner(o, rref.OwnerOnFree) != genrt.Moved {
		return
	}
	c.ownersW().del(id)
	if !mutant(mutNoTombstone) {
		c.tombstone(id, rref.ErrorKindDeleted)
	}
	c.ready.Freed = append(c.ready.Freed, Freed{RRef: id, Value: o.value})
}

// maybeDrain sends a released UserRRef's delete once no child is pinned and
// no fetch is outstanding (G1 and G2), and drops finished records.
func (c *Core) maybeDrain(u *userRec) {
	if u.state == rref.UserDraining && u.pinned == 0 && u.fetching == 0 {
		if c.stepUser(u, rref.UserOnDrained) == genrt.Moved {
			c.send(u.owner, c.pools().userDelete.fill(rref.UserDelete{RRef: u.rref, Fork: u.fork}))
		}
	}
	if u.state.IsFinal() && u.pinned == 0 && u.fetching == 0 && len(u.runs) == 0 {
		if h, ok := c.handles[u.handle]; !ok || h.kind != handleUser || h.fork != u.fork {
			c.usersW().del(u.fork) // released, or never handed to the program
		} else if u.state != rref.UserDeleted {
			c.usersW().del(u.fork) // lost or orphaned: the handle alone remembers why
			lost := *h             // a new record: a clone may share the old one (cow.go)
			lost.kind = handleLost
			lost.owner = u.owner
			lost.lost = rref.ErrorKindLost
			if u.state == rref.UserOrphaned {
				lost.lost = rref.ErrorKindOwnerFailed
			}
			c.handlesW()[u.handle] = &lost
		}
	}
}

// Counters returns the debug counters.
func (c *Core) Counters() Counters {
	n := Counters{Owners: c.owners.len(), Duplicates: c.dupes, BadInput: c.bad, Illegal: c.illegals,
		PendingMessages: len(c.fetches) + len(c.calls), Awaiting: c.awaiting.len(), Expired: c.expired}
	for _, k := range c.charged {
		n.Charged += k
	}
	for _, o := range c.owners.all() {
		n.Forks += o.known
		for _, w := range o.waiting {
			if w.from == c.self {
				n.PendingMessages++
			}
		}
	}
	for _, u := range c.users.all() {
		if u.state == rref.UserPending || u.state == rref.UserPendingReleased && !mutant(mutPendingReleasedUncounted) {
			n.PendingUsers++
		}
	}
	for _, p := range c.pins.all() {
		if p.state == rref.ChildPinPending {
			n.PendingChildren++
		}
	}
	return n
}

// Tick tells the core that one period of the driver's clock has passed (the
// worker's sweeper calls it; the core has no clock of its own). A record that
// has awaited its RemoteCall for the pending ticks (DefaultPendingTicks,
// WithPendingTicks) is given up as never created: its fetches fail with
// lost, its local handles are lost, and a tombstone refuses its late
// RemoteCall, as when its creator dies. Its forks were confirmed, so it must
// never be created after all; their holders learn it when they fetch.
func (c *Core) Tick() {
	c.epoch++
	var old []RRefID
	for id, since := range c.awaiting.all() {
		if c.epoch-since >= c.pendingTicks {
			old = append(old, id)
		}
	}
	if len(old) == 0 {
		return
	}
	slices.SortFunc(old, compareRRefs) // outputs in a fixed order, for replays
	lose := map[RRefID]bool{}
	for _, id := range old {
		o := c.ownersW().at(id)
		if o == nil || o.state != rref.OwnerAwaiting {
			c.awaitingW().del(id) // unreachable: settleAwait keeps the two in step
			continue
		}
		if c.giveUp(id, o, rref.OwnerOnExpire) && o.local > 0 {
			lose[id] = true
		}
		c.expired++
	}
	c.loseLocalHandles(lose)
}

// giveUp ends the record of a value that will never be created: its creator
// died, or it expired. It reports whether the record was dropped.
func (c *Core) giveUp(id RRefID, o *ownerRec, e rref.OwnerEvent) bool {
	if c.stepOwner(o, e) != genrt.Moved {
		return false
	}
	c.settleAwait(id, o)
	c.ownersW().del(id)
	c.tombstone(id, rref.ErrorKindLost)
	for _, wf := range o.waiting {
		c.failFetch(id, wf, rref.ErrorKindLost)
	}
	return true
}

// failFetch answers a waiting fetch with an error: in a FetchRet, or, for
// this worker's own fetch, in a FetchResult.
func (c *Core) failFetch(id RRefID, w waitingFetch, k ErrorKind) {
	if w.from == c.self && !mutant(mutSelfFetchSent) {
		c.ready.Fetches = append(c.ready.Fetches, FetchResult{FetchID: w.fetchID, Handle: w.handle, Err: k})
		return
	}
	c.send(w.from, c.pools().fetchRet.fill(rref.FetchRet{FetchID: w.fetchID, RRef: id, Error: k}))
}
