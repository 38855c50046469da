package core

import (
	"errors"
	"math"
	"slices"
	"time"

	"github.com/rrefkit/rref/generated/rref"
	"github.com/rrefkit/rref/genrt"
)

// Deliver applies one message from worker from. A message that is malformed
// or inconsistent with what this worker knows is refused: counted, reported
// in Ready.Errors and returned, with no state changed. Duplicates of control
// messages are ignored and counted. Deliver keeps no reference to m itself
// (DeliverFrame decodes every frame into the same storage), and m's byte
// slices only through the Ready it produces (arguments, results, values):
// once that is acted on, the caller may reuse the frame m came in.
func (c *Core) Deliver(from WorkerID, m rref.Message) error {
	if c.dead.has(from) {
		return nil // a message from a worker declared dead is dropped, as the network would
	}
	switch m := m.(type) {
	case *rref.Call:
		if err := c.checkDescs(from, rref.CodeCall, m.RRefs); err != nil {
			return err
		}
		pastDeadline, cancelled := c.earlyCancels.get(callKey{from, m.CallID})
		c.runAfter(from, m.RRefs, Run{Kind: RunCall, From: from, CallID: m.CallID, Fn: m.Function, Args: m.Args,
			Timeout: callTimeout(m.Timeout), Cancelled: cancelled, PastDeadline: pastDeadline, Meta: m.Metadata})
	case *rref.CallRet:
		if c.calls[m.CallID] != from {
			return c.refuse(from, rref.CodeCallRet, "reply to call %d, which was not made to it", m.CallID)
		}
		if err := c.checkDescs(from, rref.CodeCallRet, m.RRefs); err != nil {
			return err
		}
		delete(c.callsW(), m.CallID)
		hs := c.receiveAll(from, m.RRefs, nil)
		c.ready.Calls = append(c.ready.Calls, CallResult{CallID: m.CallID, Result: m.Result, Handles: hs, Err: m.Error, Message: m.Message, Code: m.Code})
	case *rref.RemoteCall:
		return c.onRemoteCall(from, m)
	case *rref.RemoteRet:
		return c.onConfirm(from, rref.CodeRemoteRet, m.RRef, m.Fork, false)
	case *rref.ForkAck:
		return c.onConfirm(from, rref.CodeForkAck, m.RRef, m.Fork, m.Refused)
	case *rref.FetchCall:
		return c.onFetchCall(from, m)
	case *rref.FetchRet:
		return c.onFetchRet(from, m)
	case *rref.ForkRequest:
		return c.onForkRequest(from, m)
	case *rref.ChildAccept:
		return c.onChildAccept(from, m)
	case *rref.UserDelete:
		return c.onUserDelete(from, m)
	case *rref.CallCancel:
		// A call still waiting for its RRef arguments' confirmation is
		// marked here, to run cancelled; one handed out is the driver's,
		// which looks it up by (from, id): a peer cancels only its own calls.
		// One for a call not seen yet (it overtook its call) is remembered,
		// boundedly, so that the call runs cancelled when it comes.
		if !c.cancelPending(from, m.CallID, m.Deadline) {
			c.ready.Cancels = append(c.ready.Cancels, Cancel{From: from, CallID: m.CallID, Deadline: m.Deadline})
			c.earlyCancelsW().add(callKey{from, m.CallID}, m.Deadline)
		}
	case *rref.Error:
		c.ready.Errors = append(c.ready.Errors, &BadInputError{From: from, Code: rref.CodeError, Why: "peer reports " + m.Kind.String() + ": " + m.Message})
	default:
		return c.refuse(from, 0, "unknown message type %T", m)
	}
	return nil
}

// checkDescs validates RRefs arriving in a call before any is acted on.
func (c *Core) checkDescs(from WorkerID, code rref.Code, ds []rref.RRefDesc) error {
	seen := map[ForkID]bool{}
	for _, d := range ds {
		if d.Fork.Worker != from {
			return c.refuse(from, code, "fork %v was not minted by its sender", d.Fork)
		}
		if seen[d.Fork] {
			return c.refuse(from, code, "fork %v appears twice", d.Fork)
		}
		seen[d.Fork] = true
		if d.Parent == asFork(d.RRef) && d.Owner != from {
			return c.refuse(from, code, "%v claims to come from its owner %d", d.Fork, d.Owner)
		}
	}
	return nil
}

func (c *Core) onRemoteCall(from WorkerID, m *rref.RemoteCall) error {
	if m.RRef.Worker != from || m.Fork.Worker != from {
		return c.refuse(from, rref.CodeRemoteCall, "ids %v/%v were not minted by the caller", m.RRef, m.Fork)
	}
	if err := c.checkDescs(from, rref.CodeRemoteCall, m.RRefs); err != nil {
		return err
	}
	if t, gone := c.tombs.get(m.RRef); gone && !mutant(mutLateRemoteRecreates) {
		if t.kind == rref.ErrorKindLost {
			c.refuseLateRemote(from, m)
			return nil
		}
		c.dupes++ // a resent RemoteCall never re-creates a freed value
		return nil
	} else if gone {
		c.tombsW().m.del(m.RRef) // the mutant forgets the value was freed
	}
	o := c.ownersW().at(m.RRef)
	created := o == nil
	if created {
		o = &ownerRec{state: rref.OwnerStart}
	}
	awaited := o.state == rref.OwnerAwaiting
	if c.stepOwner(o, rref.OwnerOnCreate) != genrt.Moved {
		c.dupes++
		if mutant(mutResentRemoteRunsAgain) {
			c.ready.Runs = append(c.ready.Runs, Run{Kind: RunRemote, From: from, RRef: m.RRef, Fn: m.Function, Args: m.Args})
		}
		return nil
	}
	if created {
		c.ownersW().put(m.RRef, o)
	}
	if awaited {
		c.settleAwait(m.RRef, o)
	}
	if f, ok := o.forks.get(m.Fork); ok {
		if f.holder != from {
			// A fork request overtook the RemoteCall naming the creator's own
			// fork: only its creator holds it, so the request was a squat.
			// The squatter was told yes, but its delete and fetches through
			// this fork are refused from now on.
			c.refuseErr(f.holder, rref.CodeForkRequest, ErrForkHeld, "fork %v of %v is its creator's, %s", m.Fork, m.RRef, c.who(from))
			f.holder = from
			o.forks.put(m.Fork, f)
		}
	} else if c.stepFork(&f, rref.ForkOnCreate) == genrt.Moved {
		f.holder = from
		o.forks.put(m.Fork, f)
		o.known++
	}
	if c.deferAcks {
		// Held back for the creator's fetch to take along (answerFetch);
		// the driver's FlushAck sends it if none does.
		o.creator, o.ackHeld = m.Fork, true
		c.ready.DeferredAcks = append(c.ready.DeferredAcks, m.RRef)
	} else {
		c.send(from, c.pools().remoteRet.fill(rref.RemoteRet{RRef: m.RRef, Fork: m.Fork}))
	}
	c.runAfter(from, m.RRefs, Run{Kind: RunRemote, From: from, RRef: m.RRef, Fn: m.Function, Args: m.Args, Meta: m.Metadata})
	return nil
}

// refuseLateRemote answers a RemoteCall whose value was given up before it
// arrived (its record expired). The value must never exist now: forks of it
// were confirmed, and their deletes were absorbed by the tombstone. The
// creator's fork is refused, so its handle is lost rather than pending, and
// the RRefs it passed are received and released at once, so their owners
// and parents are answered.
func (c *Core) refuseLateRemote(from WorkerID, m *rref.RemoteCall) {
	for _, h := range c.receiveAll(from, m.RRefs, nil) {
		c.Release(h)
	}
	c.send(from, c.pools().forkAck.fill(rref.ForkAck{RRef: m.RRef, Fork: m.Fork, Refused: true}))
}

// onConfirm handles the owner's answer to a fork: RemoteRet for the creator's
// fork, ForkAck for a fork requested by a user that got it from another user.
func (c *Core) onConfirm(from WorkerID, code rref.Code, id RRefID, fork ForkID, refused bool) error {
	u := c.usersW().at(fork)
	if u == nil {
		c.dupes++ // answered before: the record is gone
		return nil
	}
	if u.owner != from || u.rref != id {
		return c.refuse(from, code, "answer for fork %v of %v, which it does not own", fork, id)
	}
	c.confirm(u, code, refused)
	return nil
}

// confirm applies the owner's answer to fork u, and drains u, unless u had
// an answer before; it reports whether it applied it.
func (c *Core) confirm(u *userRec, code rref.Code, refused bool) bool {
	if u.state != rref.UserPending && u.state != rref.UserPendingReleased {
		c.dupes++
		return false
	}
	id, fork := u.rref, u.fork
	// A creator's fork has no parent to tell: the owner refuses it with a
	// ForkAck only when it gave the value up (refuseLateRemote).
	viaParent := code == rref.CodeForkAck && u.parent != ForkID{}
	if refused {
		c.stepUser(u, rref.UserOnRefuse)
	} else {
		c.stepUser(u, rref.UserOnConfirm)
	}
	if viaParent && !mutant(mutChildAcceptEarly) {
		// Only now may the parent unpin the child (G2).
		c.send(u.parentW, c.pools().childAccept.fill(rref.ChildAccept{RRef: id, Child: fork, Refused: refused}))
	}
	c.settleRuns(u)
	c.maybeDrain(u)
	return true
}

// onFetchCall serves a fetch to whoever names an RRef this owner holds: the
// id is the capability. The fork need not be known yet, as a child may fetch
// while its ForkRequest is in flight, but one another worker holds is
// refused. A value not yet created is waited for, within the sender's bound.
func (c *Core) onFetchCall(from WorkerID, m *rref.FetchCall) error {
	o, gone := c.ownerOf(m.RRef)
	if o == nil && gone != rref.ErrorKindNone {
		if gone == rref.ErrorKindDeleted && !c.forkGone(m.Fork) && !mutant(mutDeletedForUnknownFork) {
			// The value was freed, and this fork was never among its
			// references: a crash cut it off (its parent died before the
			// owner heard of it). Its handle is live, so it is lost, not
			// deleted (S4); a released handle's fork is remembered as gone.
			gone = rref.ErrorKindLost
		}
		c.send(from, c.pools().fetchRet.fill(rref.FetchRet{FetchID: m.FetchID, RRef: m.RRef, Error: gone}))
		return nil
	}
	if o != nil {
		if f, ok := o.forks.get(m.Fork); ok && f.holder != from {
			c.send(from, c.pools().fetchRet.fill(rref.FetchRet{FetchID: m.FetchID, RRef: m.RRef, Error: rref.ErrorKindBadRequest}))
			return c.refuseErr(from, rref.CodeFetchCall, ErrForkHeld, "fetch through fork %v, held by %s", m.Fork, c.who(f.holder))
		}
	}
	if o == nil || o.state == rref.OwnerAwaiting {
		var err error
		if o, err = c.admit(from, m.RRef, o, rref.CodeFetchCall, "fetch"); err != nil {
			c.send(from, c.pools().fetchRet.fill(rref.FetchRet{FetchID: m.FetchID, RRef: m.RRef, Error: rref.ErrorKindLost}))
			return err
		}
	}
	w := waitingFetch{from: from, fetchID: m.FetchID, fork: m.Fork}
	if o.state == rref.OwnerReady {
		c.answerFetch(m.RRef, o, w)
	} else {
		o.waiting = append(o.waiting, w) // the value does not exist yet: wait for it
	}
	return nil
}

func (c *Core) onFetchRet(from WorkerID, m *rref.FetchRet) error {
	f, ok := c.fetches[m.FetchID]
	if !ok {
		c.dupes++
		return nil
	}
	u := c.usersW().at(f.fork)
	if u == nil || u.owner != from || u.rref != m.RRef {
		return c.refuse(from, rref.CodeFetchRet, "reply to fetch %d from a worker that is not its owner", m.FetchID)
	}
	if m.Confirms && u.parent != (ForkID{}) {
		// Only a creator's RemoteRet is held back: a child's fork is
		// confirmed by ForkAck, which its parent waits to hear of.
		return c.refuse(from, rref.CodeFetchRet, "reply to fetch %d confirms fork %v, which is not its creator's", m.FetchID, f.fork)
	}
	delete(c.fetchesW(), m.FetchID)
	u.fetching--
	c.ready.Fetches = append(c.ready.Fetches, FetchResult{FetchID: m.FetchID, Handle: f.handle, Value: m.Value, Err: m.Error, Message: m.Message, Code: m.Code})
	if m.Confirms && c.confirm(u, rref.CodeRemoteRet, false) {
		return nil // drained
	}
	c.maybeDrain(u)
	return nil
}

// onForkRequest confirms a fork to the worker that asks for it, or refuses
// it. Every refusal is answered, so that an honest child (one whose fork id
// was squatted, or that was handed a forged RRef) is lost, unpins its parent
// and runs its call, instead of waiting forever.
func (c *Core) onForkRequest(from WorkerID, m *rref.ForkRequest) error {
	refused := func() {
		c.send(from, c.pools().forkAck.fill(rref.ForkAck{RRef: m.RRef, Fork: m.Fork, Refused: true}))
	}
	if m.Parent == asFork(m.RRef) {
		refused() // the owner registers its own children when it sends them
		return c.refuse(from, rref.CodeForkRequest, "fork %v names the owner as its parent", m.Fork)
	}
	if mutant(mutRefuseAfterCrash) && len(c.dead) > 0 {
		refused()
		return nil
	}
	o, gone := c.ownerOf(m.RRef)
	if (o == nil && gone == rref.ErrorKindNone || o != nil && o.state == rref.OwnerAwaiting) && mutant(mutForkRequestDropped) {
		return nil
	}
	if o == nil && gone != rref.ErrorKindNone {
		// Freed, or never created: the child is refused and still unpins its parent.
		refused()
		return nil
	}
	var f forkRec
	seen := false
	if o != nil {
		f, seen = o.forks.get(m.Fork)
	}
	if !seen && c.forkGone(m.Fork) {
		// Resent after the fork was deleted, or asked for by the real child
		// of a squatted fork the squatter has since deleted, or refused
		// before: it must not come back.
		c.dupes++
		refused()
		return nil
	}
	if seen && f.holder != from {
		refused()
		return c.refuseErr(from, rref.CodeForkRequest, ErrForkHeld, "fork %v is held by %s", m.Fork, c.who(f.holder))
	}
	if !seen && o != nil {
		if p, ok := o.forks.get(m.Parent); ok && p.holder != m.Fork.Worker {
			// A child's id is minted by its parent's holder.
			c.goneForksW().add(m.Fork, struct{}{})
			refused()
			return c.refuse(from, rref.CodeForkRequest, "fork %v names parent %v, held by %s, which did not mint it", m.Fork, m.Parent, c.who(p.holder))
		}
	}
	if !seen && (o == nil || o.state == rref.OwnerAwaiting) {
		var err error
		if o, err = c.admit(from, m.RRef, o, rref.CodeForkRequest, "fork request"); err != nil {
			c.goneForksW().add(m.Fork, struct{}{}) // refused for good: a resend must not be confirmed
			refused()
			return err
		}
	}
	if !seen {
		f = forkRec{state: rref.ForkStart, holder: from}
	}
	if c.stepFork(&f, rref.ForkOnRequest) != genrt.Moved {
		if mutant(mutDuplicateForkCounted) && f.state == rref.ForkKnown {
			o.known++
		}
		c.dupes++
		if f.state == rref.ForkKnown {
			c.send(from, c.pools().forkAck.fill(rref.ForkAck{RRef: m.RRef, Fork: m.Fork})) // the ACK may have been lost with a connection
		}
		return nil
	}
	if !mutant(mutAckUnrecorded) {
		o.forks.put(m.Fork, f)
		o.known++
	}
	c.send(from, c.pools().forkAck.fill(rref.ForkAck{RRef: m.RRef, Fork: m.Fork}))
	return nil
}

func (c *Core) onChildAccept(from WorkerID, m *rref.ChildAccept) error {
	p := c.pinsW().at(m.Child)
	if p == nil {
		c.dupes++
		return nil
	}
	if p.child != from || p.rref != m.RRef {
		return c.refuse(from, rref.CodeChildAccept, "accept for child %v, which it does not hold", m.Child)
	}
	e := rref.ChildPinOnAccept
	if m.Refused {
		e = rref.ChildPinOnRefuse
	}
	c.resolvePin(m.Child, p, e)
	return nil
}

func (c *Core) resolvePin(child ForkID, p *pinRec, e rref.ChildPinEvent) {
	if c.stepPin(p, e) != genrt.Moved {
		return
	}
	c.pinsW().del(child)
	if u := c.usersW().at(p.parent); u != nil {
		u.pinned--
		c.maybeDrain(u)
	}
}

func (c *Core) onUserDelete(from WorkerID, m *rref.UserDelete) error {
	if t, gone := c.tombs.get(m.RRef); gone {
		if t.kind == rref.ErrorKindDeleted {
			c.dupes++
		}
		return nil
	}
	o := c.ownersW().at(m.RRef)
	if o == nil {
		return c.refuse(from, rref.CodeUserDelete, "delete for unknown %v", m.RRef)
	}
	f, ok := o.forks.get(m.Fork)
	if !ok && c.forkGone(m.Fork) {
		c.dupes++
		return nil
	}
	if !ok {
		return c.refuse(from, rref.CodeUserDelete, "delete for unknown fork %v of %v", m.Fork, m.RRef)
	}
	if f.holder != from {
		return c.refuseErr(from, rref.CodeUserDelete, ErrForkHeld, "delete for fork %v, held by %s", m.Fork, c.who(f.holder))
	}
	switch c.stepFork(&f, rref.ForkOnDelete) {
	case genrt.Moved:
		c.storeFork(o, m.Fork, f)
		o.known--
		if mutant(mutOwnerDeletesOnFirst) {
			o.known, o.local = 0, 0
		}
		c.maybeFree(m.RRef, o)
	case genrt.Ignored:
		c.dupes++
	}
	return nil
}

// PeerFailed tells the core that worker w died. Its references are
// reclaimed, pins on its children dropped, fetches from it failed, values it
// was about to create given up, and calls to it failed.
func (c *Core) PeerFailed(w WorkerID) {
	if w == c.self || c.dead.has(w) {
		return
	}
	c.writes(tabDead) // drops its digest; the set itself is replaced, never changed
	c.dead = c.dead.with(w)
	// Maps are walked in sorted order so the outputs, and every replay, are deterministic.
	var lose map[RRefID]bool
	for _, id := range sortedIDs(&c.owners) {
		if !c.touchedByDeath(id, c.owners.at(id), w) {
			continue // read, not copied: a crash reaches few of a core's values
		}
		o := c.ownersW().at(id)
		for _, fid := range sortedIDs(&o.forks) {
			f := o.forks.at(fid)
			if f.holder == w && !mutant(mutDeadHolderKept) && c.stepFork(&f, rref.ForkOnHolderFailed) == genrt.Moved {
				c.storeFork(o, fid, f)
				o.known--
			}
		}
		kept := o.waiting[:0]
		for _, wf := range o.waiting {
			if wf.from != w {
				kept = append(kept, wf)
			}
		}
		o.waiting = kept
		if id.Worker == w && o.state == rref.OwnerAwaiting {
			if c.giveUp(id, o, rref.OwnerOnCreatorFailed) && o.local > 0 {
				if lose == nil {
					lose = map[RRefID]bool{}
				}
				lose[id] = true
			}
			continue
		}
		c.maybeFree(id, o)
	}
	c.loseLocalHandles(lose)
	for _, child := range sortedIDs(&c.pins) {
		if p := c.pins.at(child); p.owner != w && p.child != w {
			continue
		}
		p := c.pinsW().at(child)
		switch {
		case p.owner == w:
			c.resolvePin(child, p, rref.ChildPinOnOwnerFailed)
		case p.child == w && !mutant(mutDeadChildPinned):
			c.resolvePin(child, p, rref.ChildPinOnChildFailed)
		}
	}
	for _, id := range sortedU64(c.fetches) {
		f := c.fetches[id]
		if u := c.users.at(f.fork); u == nil || u.owner != w {
			continue
		}
		if u := c.usersW().at(f.fork); !mutant(mutOwnerDeathNotToFetches) {
			delete(c.fetchesW(), id)
			u.fetching--
			c.ready.Fetches = append(c.ready.Fetches, FetchResult{FetchID: id, Handle: f.handle, Err: rref.ErrorKindOwnerFailed})
		}
	}
	for _, fid := range sortedIDs(&c.users) {
		if u := c.users.at(fid); u == nil || u.owner != w {
			continue
		}
		if u := c.usersW().at(fid); u != nil {
			c.stepUser(u, rref.UserOnOwnerFailed)
			c.settleRuns(u)
			c.maybeDrain(u)
		}
	}
	for _, id := range sortedU64(c.calls) {
		if c.calls[id] == w {
			delete(c.callsW(), id)
			c.ready.Calls = append(c.ready.Calls, CallResult{CallID: id, Err: rref.ErrorKindOwnerFailed, Message: "worker failed"})
		}
	}
}

// touchedByDeath reports whether worker w's death changes o, the record
// of id: w holds one of its forks, waits for its value, or was to create it.
func (c *Core) touchedByDeath(id RRefID, o *ownerRec, w WorkerID) bool {
	if id.Worker == w && o.state == rref.OwnerAwaiting {
		return true
	}
	for _, f := range o.forks.all() {
		if f.holder == w {
			return true
		}
	}
	for _, wf := range o.waiting {
		if wf.from == w {
			return true
		}
	}
	return false
}

// loseLocalHandles marks the owner's local handles of values that will
// never exist, in one walk of the handles however many there are.
func (c *Core) loseLocalHandles(ids map[RRefID]bool) {
	if len(ids) == 0 {
		return
	}
	handles := c.handlesW()
	for id, h := range handles {
		if h.kind == handleOwner && ids[h.rref] {
			// A new record: a clone may share the old one (cow.go).
			handles[id] = &handleRec{kind: handleLost, rref: h.rref, fork: h.fork, lost: rref.ErrorKindLost, owner: c.self}
		}
	}
}

// DeliverFrame decodes one frame from worker from and delivers it. A frame
// that does not decode is refused like any bad input, with the decoder's error.
//
// The message is decoded into storage the core reuses (rref.Decoder): Deliver
// copies what it keeps out of a message (its byte fields still alias frame),
// so a frame costs no allocation for the message itself.
func (c *Core) DeliverFrame(from WorkerID, frame []byte, lim *genrt.Limits) error {
	if c.dec == nil {
		c.dec = &rref.Decoder{}
	}
	c.dec.Limits = genrt.Limits{}
	if lim != nil {
		c.dec.Limits = *lim
		// The decoder interns with its own table: one Limits may be handed
		// to cores on other goroutines, and a table is not shared safely.
		c.dec.Limits.Strings = nil
	}
	m, err := c.dec.Decode(frame)
	if err != nil {
		c.bad++
		e := &BadInputError{From: from, Why: err.Error()}
		c.ready.Errors = append(c.ready.Errors, e)
		return errors.Join(e, err)
	}
	return c.Deliver(from, m)
}

// callTimeout is a Call's timeout field as a duration: past the largest
// duration (a hostile or broken peer), as good as none.
func callTimeout(ns uint64) time.Duration {
	if ns > math.MaxInt64 {
		return 0
	}
	return time.Duration(ns)
}

// cancelPending marks the call id from worker from cancelled if it still
// waits for its arguments' confirmation, and reports whether it did. A peer
// may have two calls with one id waiting (its own mistake): both are
// marked, so that which one is does not depend on the order of a table.
func (c *Core) cancelPending(from WorkerID, id uint64, deadline bool) bool {
	matches := func(r *pendingRun) bool {
		return r.run.Kind == RunCall && r.run.From == from && r.run.CallID == id
	}
	found := false
	for _, u := range c.users.all() {
		if slices.ContainsFunc(u.runs, matches) {
			found = true
			break
		}
	}
	if !found {
		return false
	}
	for _, u := range c.usersW().all() { // the copies' own runs (cow.go)
		for _, r := range u.runs {
			if matches(r) {
				r.run.Cancelled, r.run.PastDeadline = true, deadline
			}
		}
	}
	return true
}
