package core

import (
	"fmt"

	"github.com/rrefkit/rref/generated/rref"
	"github.com/rrefkit/rref/genrt"
)

// DefaultTombstones bounds how many freed RRef ids an owner remembers.
const DefaultTombstones = 1 << 16

type forkRec struct {
	state  rref.ForkState
	holder WorkerID
}

type waitingFetch struct {
	from    WorkerID // self for a local fetch
	fetchID uint64
	handle  HandleID // local fetches only
}

type ownerRec struct {
	state   rref.OwnerState
	value   []byte
	err     ErrorKind
	errMsg  string
	forks   map[ForkID]forkRec // every fork the owner has heard of, deleted ones included
	known   int                // forks in state known
	local   int                // local handles on the owner
	waiting []waitingFetch
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
	kind handleKind
	rref RRefID
	fork ForkID // user and self-fork handles
	lost ErrorKind
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
	nextID    uint64 // RRef and fork ids: one counter, as PyTorch has
	nextLocal uint64 // handles, fetches and calls

	owners  map[RRefID]*ownerRec
	users   map[ForkID]*userRec
	pins    map[ForkID]*pinRec
	handles map[HandleID]*handleRec
	fetches map[uint64]fetchRec
	calls   map[uint64]WorkerID
	dead    map[WorkerID]bool

	tombs     bounded[RRefID, tombstone] // freed or never-created values
	goneForks bounded[ForkID, struct{}]  // recently deleted forks, so a resend cannot revive one
	tombLimit int

	dupes, bad, illegals int
	ready                Ready
	dec                  rref.Decoder // DeliverFrame's, reused: Deliver keeps no message
	msgs                 msgPools     // sent messages passed back by TakeReadyInto
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

// New returns the core of worker self.
func New(self WorkerID, opts ...Option) *Core {
	c := &Core{
		self:      self,
		owners:    map[RRefID]*ownerRec{},
		users:     map[ForkID]*userRec{},
		pins:      map[ForkID]*pinRec{},
		handles:   map[HandleID]*handleRec{},
		fetches:   map[uint64]fetchRec{},
		calls:     map[uint64]WorkerID{},
		dead:      map[WorkerID]bool{},
		tombLimit: DefaultTombstones,
	}
	for _, o := range opts {
		o(c)
	}
	c.tombs = newBounded[RRefID, tombstone](c.tombLimit)
	c.goneForks = newBounded[ForkID, struct{}](c.tombLimit)
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
			c.msgs.reclaim(e.Msg)
		}
	}
	r.Reset()
	c.ready, *r = *r, c.ready
}

// HasReady reports whether TakeReady would return anything.
func (c *Core) HasReady() bool { return !c.ready.Empty() }

func (c *Core) send(to WorkerID, m rref.Message) {
	if c.dead[to] {
		return // the network drops what is sent to the dead
	}
	c.ready.Messages = append(c.ready.Messages, Envelope{From: c.self, To: to, Msg: m})
}

func (c *Core) newID() uint64 {
	c.nextID++
	return c.nextID
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
	c.bad++
	err := &BadInputError{From: from, Code: code, Why: fmt.Sprintf(format, args...)}
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

func (c *Core) tombstone(id RRefID, kind ErrorKind) { c.tombs.add(id, tombstone{kind: kind}) }

// storeFork writes a fork back; a fork in a final state is dropped from its
// owner and remembered, boundedly, as gone, so memory follows live forks only.
func (c *Core) storeFork(o *ownerRec, id ForkID, f forkRec) {
	if !f.state.IsFinal() {
		o.forks[id] = f
		return
	}
	delete(o.forks, id)
	c.goneForks.add(id, struct{}{})
}

func (c *Core) forkGone(id ForkID) bool {
	_, ok := c.goneForks.get(id)
	return ok
}

func (c *Core) newHandle(h *handleRec) HandleID {
	id := HandleID(c.newLocal())
	c.handles[id] = h
	return id
}

// ownerFor returns the owner record of id, creating an awaiting one when a
// message overtook the RemoteCall. It returns nil with the tombstone's kind
// when the value is gone or can never exist.
func (c *Core) ownerFor(id RRefID) (*ownerRec, ErrorKind) {
	if o := c.owners[id]; o != nil {
		return o, rref.ErrorKindNone
	}
	if t, ok := c.tombs.get(id); ok {
		return nil, t.kind
	}
	if id.Worker == c.self {
		// Values this worker creates exist from the start; one without a
		// record was freed and its tombstone since forgotten.
		return nil, rref.ErrorKindDeleted
	}
	if c.dead[id.Worker] {
		// Its creator died before its RemoteCall arrived: it never will.
		c.tombstone(id, rref.ErrorKindLost)
		return nil, rref.ErrorKindLost
	}
	o := &ownerRec{state: rref.OwnerStart, forks: map[ForkID]forkRec{}}
	if c.stepOwner(o, rref.OwnerOnAwait) == 0 {
		return nil, rref.ErrorKindLost
	}
	c.owners[id] = o
	return o, rref.ErrorKindNone
}

// maybeFree frees an owner's value once nothing refers to it.
func (c *Core) maybeFree(id RRefID, o *ownerRec) {
	if o.state != rref.OwnerReady || o.known > 0 || o.local > 0 {
		return
	}
	if c.stepOwner(o, rref.OwnerOnFree) != genrt.Moved {
		return
	}
	delete(c.owners, id)
	c.tombstone(id, rref.ErrorKindDeleted)
	c.ready.Freed = append(c.ready.Freed, Freed{RRef: id, Value: o.value})
}

// maybeDrain sends a released UserRRef's delete once no child is pinned and
// no fetch is outstanding (G1 and G2), and drops finished records.
func (c *Core) maybeDrain(u *userRec) {
	if u.state == rref.UserDraining && u.pinned == 0 && u.fetching == 0 {
		if c.stepUser(u, rref.UserOnDrained) == genrt.Moved {
			c.send(u.owner, c.msgs.userDelete.fill(rref.UserDelete{RRef: u.rref, Fork: u.fork}))
		}
	}
	if u.state.IsFinal() && u.pinned == 0 && u.fetching == 0 && len(u.runs) == 0 {
		if h, ok := c.handles[u.handle]; !ok || h.kind != handleUser || h.fork != u.fork {
			delete(c.users, u.fork) // released, or never handed to the program
		} else if u.state != rref.UserDeleted {
			delete(c.users, u.fork) // lost or orphaned: the handle alone remembers why
			h.kind = handleLost
			h.lost = rref.ErrorKindLost
			if u.state == rref.UserOrphaned {
				h.lost = rref.ErrorKindOwnerFailed
			}
		}
	}
}

// Counters returns the debug counters.
func (c *Core) Counters() Counters {
	n := Counters{Owners: len(c.owners), Duplicates: c.dupes, BadInput: c.bad, Illegal: c.illegals,
		PendingMessages: len(c.fetches) + len(c.calls)}
	for _, o := range c.owners {
		n.Forks += o.known
		for _, w := range o.waiting {
			if w.from == c.self {
				n.PendingMessages++
			}
		}
	}
	for _, u := range c.users {
		if u.state == rref.UserPending || u.state == rref.UserPendingReleased {
			n.PendingUsers++
		}
	}
	for _, p := range c.pins {
		if p.state == rref.ChildPinPending {
			n.PendingChildren++
		}
	}
	return n
}
