package core

import (
	"bytes"
	"fmt"
	"strings"
	"time"

	"github.com/rrefkit/rref/generated/rref"
	"github.com/rrefkit/rref/genrt"
)

// NewLocal creates an OwnerRRef on this worker holding value (RRef(v)).
func (c *Core) NewLocal(value []byte) HandleID {
	id := RRefID{Worker: c.self, Local: c.newID()}
	o := &ownerRec{state: rref.OwnerStart, value: value, local: 1}
	c.stepOwner(o, rref.OwnerOnLocal)
	c.ownersW().put(id, o)
	return c.newHandle(&handleRec{kind: handleOwner, rref: id})
}

// Remote asks worker to create a value from fn(args) and returns a handle to
// it at once (remote()). args may carry RRefs the callee receives. When
// worker is this one, the value is created here, with the owner's own fork
// (fork == rref) as the handle.
func (c *Core) Remote(worker WorkerID, fn string, args []byte, refs []HandleID) (HandleID, error) {
	return c.RemoteWithMeta(worker, fn, args, refs, nil)
}

// RemoteWithMeta is Remote with metadata, which travels in the RemoteCall
// to the function's run (Run.Meta) and is not otherwise read. The core
// keeps meta until the RemoteCall is sent: the caller must not change it.
func (c *Core) RemoteWithMeta(worker WorkerID, fn string, args []byte, refs []HandleID, meta []rref.MetaEntry) (HandleID, error) {
	if c.dead.has(worker) {
		return 0, fmt.Errorf("%w: remote to %s", ErrPeerDead, c.who(worker))
	}
	if err := c.checkPassable(refs); err != nil {
		return 0, err
	}
	id := RRefID{Worker: c.self, Local: c.newID()}
	if worker == c.self {
		self := asFork(id)
		o := &ownerRec{state: rref.OwnerStart}
		c.stepOwner(o, rref.OwnerOnCreate)
		f := forkRec{state: rref.ForkStart, holder: c.self}
		c.stepFork(&f, rref.ForkOnCreate)
		o.forks.put(self, f)
		o.known++
		c.ownersW().put(id, o)
		h := c.newHandle(&handleRec{kind: handleSelfFork, rref: id, fork: self})
		descs := c.forkAll(refs, c.self)
		c.runAfter(c.self, descs, Run{Kind: RunRemote, From: c.self, RRef: id, Fn: fn, Args: args, Meta: meta})
		return h, nil
	}
	fork := ForkID{Worker: c.self, Local: c.newID()}
	for fork == asFork(id) {
		// The creator's fork equal to its RRef would read as the owner's own.
		fork.Local = c.newID()
	}
	u := &userRec{state: rref.UserStart, owner: worker, rref: id, fork: fork, parentW: worker}
	c.usersW().put(fork, u)
	u.handle = c.newHandle(&handleRec{kind: handleUser, rref: id, fork: fork})
	c.send(worker, c.pools().remoteCall.fill(rref.RemoteCall{RRef: id, Fork: fork, Function: fn, Args: args, RRefs: c.forkAll(refs, worker), Metadata: meta}))
	return u.handle, nil
}

// Call sends a plain call to worker (rpc_sync/rpc_async); the result arrives
// as a CallResult with the returned id.
func (c *Core) Call(worker WorkerID, fn string, args []byte, refs []HandleID) (uint64, error) {
	return c.CallWithin(worker, fn, args, refs, 0)
}

// CallWithin is Call with the caller's remaining time (0: none), which
// travels with the call and bounds the callee's run of it (Run.Timeout).
func (c *Core) CallWithin(worker WorkerID, fn string, args []byte, refs []HandleID, timeout time.Duration) (uint64, error) {
	return c.CallWithMeta(worker, fn, args, refs, timeout, nil)
}

// CallWithMeta is CallWithin with metadata, which travels in the Call to the
// function's run (Run.Meta) and is not otherwise read. The core keeps meta
// until the Call is sent: the caller must not change it.
func (c *Core) CallWithMeta(worker WorkerID, fn string, args []byte, refs []HandleID, timeout time.Duration, meta []rref.MetaEntry) (uint64, error) {
	if c.dead.has(worker) {
		return 0, fmt.Errorf("%w: call to %s", ErrPeerDead, c.who(worker))
	}
	if err := c.checkPassable(refs); err != nil {
		return 0, err
	}
	id := c.newLocal()
	c.callsW()[id] = worker
	c.send(worker, c.pools().call.fill(rref.Call{CallID: id, Function: fn, Args: args, RRefs: c.forkAll(refs, worker), Timeout: uint64(max(timeout, 0)), Metadata: meta}))
	return id, nil
}

// CancelCall tells the callee of call id that its caller no longer waits
// (CallCancel), so that its function's context ends. The call stays
// recorded: the callee still answers, and what the answer carries is the
// caller's to release. A call already answered, or unknown, is left alone.
func (c *Core) CancelCall(id uint64) { c.cancelCall(id, false) }

// CancelCallPastDeadline is CancelCall when it is the caller's deadline
// that passed: the function's context ends as past its deadline
// (context.DeadlineExceeded), not as cancelled. The callee's own clock
// would end it so a moment later; the cancel makes it prompt and exact.
func (c *Core) CancelCallPastDeadline(id uint64) { c.cancelCall(id, true) }

func (c *Core) cancelCall(id uint64, deadline bool) {
	if to, ok := c.calls[id]; ok {
		c.send(to, &rref.CallCancel{CallID: id, Deadline: deadline})
	}
}

// Return answers a RunCall. refs are handles this worker returns to the caller.
// A caller that died while its function ran gets nothing: its reply would be
// dropped, and a child forked for it would stay pinned (or, on the owner,
// counted) with nobody left to answer.
func (c *Core) Return(to WorkerID, callID uint64, result []byte, refs []HandleID, fail Failure) error {
	if c.dead.has(to) {
		return nil
	}
	if err := c.checkPassable(refs); err != nil {
		return err
	}
	c.send(to, c.pools().callRet.fill(rref.CallRet{CallID: callID, Error: fail.Kind, Code: fail.Code, Message: fail.Message, Result: result, RRefs: c.forkAll(refs, to)}))
	return nil
}

// CompleteRemote stores the result of a RunRemote: its value, or why the
// function failed (fail.Kind not none), which fetches then return.
func (c *Core) CompleteRemote(id RRefID, value []byte, fail Failure) error {
	o := c.ownersW().at(id)
	if o == nil || o.state != rref.OwnerPending {
		return fmt.Errorf("core: CompleteRemote for %v, which is not running", id)
	}
	if c.stepOwner(o, rref.OwnerOnComplete) != genrt.Moved {
		return nil
	}
	if fail.Kind != rref.ErrorKindNone {
		o.err, o.errCode, o.errMsg = fail.Kind, fail.Code, fail.Message
	} else {
		o.value = value
	}
	waiting := o.waiting
	o.waiting = nil
	for _, w := range waiting {
		c.answerFetch(id, o, w)
	}
	c.maybeFree(id, o)
	return nil
}

// answerFetch answers a fetch of a value that exists. o is the owners
// table's own (written through ownersW): an answer to the creator's fetch
// takes its held-back RemoteRet along.
func (c *Core) answerFetch(id RRefID, o *ownerRec, w waitingFetch) {
	if w.from == c.self {
		c.ready.Fetches = append(c.ready.Fetches, FetchResult{FetchID: w.fetchID, Handle: w.handle, Value: o.value, Err: o.err, Message: o.errMsg, Code: o.errCode})
		return
	}
	confirms := false
	if o.creator != (ForkID{}) && (w.fork == o.creator || mutant(mutAckCarriedToAnyFork)) {
		// Only its holder fetches through the creator's fork, and only a
		// known fork is confirmed: a squatter's fetch, or one after the
		// creator's delete, takes nothing along.
		if f, ok := o.forks.get(o.creator); ok && f.state == rref.ForkKnown && (f.holder == w.from || mutant(mutAckCarriedToAnyFork)) {
			o.ackHeld = false
			confirms = !mutant(mutMergedAckNotCarried)
		}
	}
	c.send(w.from, c.pools().fetchRet.fill(rref.FetchRet{FetchID: w.fetchID, RRef: id, Error: o.err, Message: o.errMsg, Code: o.errCode, Value: o.value, Confirms: confirms}))
}

// FlushAck sends the RemoteRet held back for id (WithDeferredAcks), unless
// the answer to its creator's fetch took it along, or the creator's fork is
// no longer known (its holder died, or a hostile one deleted it unconfirmed).
func (c *Core) FlushAck(id RRefID) {
	o := c.owners.at(id)
	if o == nil || !o.ackHeld {
		return // taken along, flushed, or freed
	}
	o = c.ownersW().at(id)
	o.ackHeld = false
	if f, ok := o.forks.get(o.creator); ok && f.state == rref.ForkKnown {
		c.send(f.holder, c.pools().remoteRet.fill(rref.RemoteRet{RRef: id, Fork: o.creator}))
	}
}

// Fetch asks for the value behind h (to_here). The result arrives as a
// FetchResult; a fetch that cannot succeed completes at once with its reason.
func (c *Core) Fetch(h HandleID) uint64 {
	id := c.newLocal()
	fail := func(k ErrorKind) uint64 {
		c.ready.Fetches = append(c.ready.Fetches, FetchResult{FetchID: id, Handle: h, Err: k})
		return id
	}
	hr := c.handles[h]
	if hr == nil {
		return fail(rref.ErrorKindDeleted)
	}
	switch hr.kind {
	case handleLost:
		return fail(hr.lost)
	case handleOwner, handleSelfFork:
		o := c.ownersW().at(hr.rref)
		if o == nil {
			return fail(rref.ErrorKindDeleted) // unreachable while the handle holds it
		}
		w := waitingFetch{from: c.self, fetchID: id, handle: h}
		if o.state == rref.OwnerReady {
			c.answerFetch(hr.rref, o, w)
		} else {
			o.waiting = append(o.waiting, w)
		}
		return id
	}
	u := c.usersW().at(hr.fork)
	switch {
	case u == nil || u.state == rref.UserLost:
		return fail(rref.ErrorKindLost)
	case u.state == rref.UserOrphaned:
		return fail(rref.ErrorKindOwnerFailed)
	case u.timedOut:
		return fail(rref.ErrorKindTimeout)
	}
	u.fetching++
	c.fetchesW()[id] = fetchRec{handle: h, fork: u.fork}
	c.send(u.owner, c.pools().fetchCall.fill(rref.FetchCall{FetchID: id, RRef: u.rref, Fork: u.fork}))
	return id
}

// Timeout records that the remote which created h timed out: later fetches
// fail with a timeout. The owner's reply still confirms the fork, and the
// delete still waits for it.
func (c *Core) Timeout(h HandleID) error {
	hr := c.handles[h]
	if hr == nil || hr.kind != handleUser {
		return fmt.Errorf("%w: timeout of handle %d", ErrUnknownHandle, h)
	}
	if u := c.usersW().at(hr.fork); u != nil {
		u.timedOut = true
	}
	return nil
}

// Release drops the program's handle h. Releasing twice is an error the
// caller may ignore; the protocol acts once.
func (c *Core) Release(h HandleID) error {
	hr := c.handles[h]
	if hr == nil {
		return fmt.Errorf("%w: release of handle %d", ErrUnknownHandle, h)
	}
	delete(c.handlesW(), h)
	switch hr.kind {
	case handleLost:
		return nil
	case handleOwner:
		if o := c.ownersW().at(hr.rref); o != nil {
			o.local--
			c.maybeFree(hr.rref, o)
		}
		return nil
	case handleSelfFork:
		o := c.ownersW().at(hr.rref)
		if o == nil {
			return nil
		}
		f, ok := o.forks.get(hr.fork)
		if ok && c.stepFork(&f, rref.ForkOnDelete) == genrt.Moved {
			c.storeFork(o, hr.fork, f)
			o.known--
			c.maybeFree(hr.rref, o)
		}
		return nil
	}
	u := c.usersW().at(hr.fork)
	if u == nil {
		return nil
	}
	if u.state == rref.UserPending && (mutant(mutCreatorDeleteNotDeferred) || u.timedOut && mutant(mutTimedOutDeleteEarly)) {
		u.state = rref.UserDeleted
		c.send(u.owner, c.pools().userDelete.fill(rref.UserDelete{RRef: u.rref, Fork: u.fork}))
		return nil
	}
	if u.state == rref.UserPending && mutant(mutPendingReleaseNoDelete) {
		c.usersW().del(u.fork)
		return nil
	}
	c.stepUser(u, rref.UserOnRelease)
	c.maybeDrain(u)
	return nil
}

// checkPassable rejects handles that cannot be passed on or duplicated:
// unknown or released ones. A lost or orphaned handle is not refused: it
// travels as a cut copy (see fork), so that a program holding one can still
// hand it on and its receiver learns why it is cut from its own fetch.
func (c *Core) checkPassable(refs []HandleID) error {
	for _, h := range refs {
		hr := c.handles[h]
		if hr == nil {
			return fmt.Errorf("%w: handle %d", ErrUnknownHandle, h)
		}
		if mutant(mutCutRefused) && c.cutKind(hr) != rref.ErrorKindNone {
			return fmt.Errorf("%w: handle %d", ErrHandleLost, h)
		}
	}
	return nil
}

// cutKind says why a handle is cut off from its value (lost, or its owner
// failed), or none when it is not.
func (c *Core) cutKind(hr *handleRec) ErrorKind {
	switch hr.kind {
	case handleLost:
		return hr.lost
	case handleUser:
		switch u := c.users.at(hr.fork); {
		case u == nil || u.state == rref.UserLost:
			return rref.ErrorKindLost
		case u.state == rref.UserOrphaned:
			return rref.ErrorKindOwnerFailed
		}
	}
	return rref.ErrorKindNone
}

// ownerOfHandle is the worker that owns the value behind hr.
func (c *Core) ownerOfHandle(hr *handleRec) WorkerID {
	switch hr.kind {
	case handleOwner, handleSelfFork:
		return c.self
	case handleLost:
		return hr.owner
	}
	if u := c.users.at(hr.fork); u != nil {
		return u.owner
	}
	return 0
}

// forkAll mints a child fork of each handle for worker to.
func (c *Core) forkAll(refs []HandleID, to WorkerID) []rref.RRefDesc {
	if len(refs) == 0 {
		return nil
	}
	out := make([]rref.RRefDesc, len(refs))
	for i, h := range refs {
		out[i] = c.fork(c.handles[h], to)
	}
	return out
}

// fork mints a child of hr bound for worker to. The owner registers its
// children at once (the owner's ACK is immediate); a user pins the child
// until the child reports the owner's answer (G2).
func (c *Core) fork(hr *handleRec, to WorkerID) rref.RRefDesc {
	child := ForkID{Worker: c.self, Local: c.newID()}
	if k := c.cutKind(hr); k != rref.ErrorKindNone {
		// A cut handle travels as one: no pin and no fork to confirm, for
		// there is no value to protect; the receiver's copy is cut too.
		parent := hr.fork
		if parent == (ForkID{}) {
			parent = asFork(hr.rref)
		}
		return rref.RRefDesc{Owner: c.ownerOfHandle(hr), RRef: hr.rref, Fork: child, Parent: parent, Cut: k}
	}
	if hr.kind == handleOwner || hr.kind == handleSelfFork {
		o := c.ownersW().at(hr.rref)
		for {
			if _, taken := o.forks.get(child); !taken {
				break
			}
			child.Local = c.newID() // the owner's forks of a value are not in idTaken's maps
		}
		// The fork is counted even when it travels to this worker itself: until
		// it arrives, it is the only thing keeping the value alive.
		d := rref.RRefDesc{Owner: c.self, RRef: hr.rref, Fork: child, Parent: asFork(hr.rref)}
		f := forkRec{state: rref.ForkStart, holder: to}
		c.stepFork(&f, rref.ForkOnCreate)
		o.forks.put(child, f)
		o.known++
		return d
	}
	u := c.usersW().at(hr.fork)
	if !mutant(mutNoPin) {
		c.pinsW().put(child, &pinRec{state: rref.ChildPinStart, rref: u.rref, parent: u.fork, child: to, owner: u.owner})
		u.pinned++
	}
	return rref.RRefDesc{Owner: u.owner, RRef: u.rref, Fork: child, Parent: u.fork}
}

// runAfter receives descs from worker from and emits run once every one of
// them is confirmed; a run that waits for none is emitted at once, with no
// record kept.
func (c *Core) runAfter(from WorkerID, descs []rref.RRefDesc, run Run) {
	if len(descs) == 0 {
		c.ready.Runs = append(c.ready.Runs, run)
		return
	}
	// The arguments may wait past this delivery: they must not alias the
	// frame they came in, which the caller may reuse once it has acted on
	// the Ready (see Deliver).
	run.Args = bytes.Clone(run.Args)
	run.Meta = cloneMeta(run.Meta)
	c.receiveAll(from, descs, &pendingRun{run: run})
}

// cloneMeta is a copy of meta that aliases no frame (nil for none).
func cloneMeta(meta []rref.MetaEntry) []rref.MetaEntry {
	if len(meta) == 0 {
		return nil
	}
	out := make([]rref.MetaEntry, len(meta))
	for i, e := range meta {
		out[i] = rref.MetaEntry{Key: strings.Clone(e.Key), Value: bytes.Clone(e.Value)}
	}
	return out
}

// receiveAll turns descriptors from worker from into handles, and arranges
// for run to be emitted once every one of them is confirmed.
func (c *Core) receiveAll(from WorkerID, descs []rref.RRefDesc, run *pendingRun) []HandleID {
	hs := make([]HandleID, 0, len(descs))
	for _, d := range descs {
		h, u := c.receive(from, d)
		hs = append(hs, h)
		if run != nil && u != nil && (u.state == rref.UserPending) {
			run.waiting++
			u.runs = append(u.runs, run)
		}
	}
	if run != nil {
		run.run.Handles = hs
		if run.waiting == 0 {
			c.ready.Runs = append(c.ready.Runs, run.run)
		}
	}
	return hs
}

// receive makes a handle for one descriptor. It returns the new UserRRef, if any.
func (c *Core) receive(from WorkerID, d rref.RRefDesc) (HandleID, *userRec) {
	if d.Cut != rref.ErrorKindNone {
		// The sender's handle was cut off: so is this copy, at once.
		k := d.Cut
		if k != rref.ErrorKindOwnerFailed {
			k = rref.ErrorKindLost
		}
		return c.newHandle(&handleRec{kind: handleLost, rref: d.RRef, fork: d.Fork, lost: k, owner: d.Owner}), nil
	}
	parentIsOwner := d.Parent == asFork(d.RRef)
	if d.Owner == c.self {
		// The owner as callee: no UserRRef, just a local handle.
		o, gone := c.ownerOf(d.RRef)
		if o == nil && gone == rref.ErrorKindNone || o != nil && o.state == rref.OwnerAwaiting {
			var err error
			if o, err = c.admit(from, d.RRef, o, rref.CodeCall, "handle"); err != nil {
				gone = rref.ErrorKindLost
			}
		}
		if o == nil && gone == rref.ErrorKindDeleted && !parentIsOwner && !c.forkGone(d.Parent) {
			// Freed, and the sender's fork was never among its references:
			// a crash cut it off, so this copy is lost, not deleted (as a
			// fetch through such a fork is, in onFetchCall).
			gone = rref.ErrorKindLost
		}
		if o == nil {
			if !parentIsOwner {
				c.send(from, c.pools().childAccept.fill(rref.ChildAccept{RRef: d.RRef, Child: d.Fork, Refused: true}))
			}
			return c.newHandle(&handleRec{kind: handleLost, rref: d.RRef, fork: d.Fork, lost: gone, owner: c.self}), nil
		}
		o.local++
		if !parentIsOwner {
			c.send(from, c.pools().childAccept.fill(rref.ChildAccept{RRef: d.RRef, Child: d.Fork}))
		} else if f, ok := o.forks.get(d.Fork); ok && f.holder == c.self && c.stepFork(&f, rref.ForkOnDelete) == genrt.Moved {
			// The owner's own fork came home: the local handle now holds the value.
			c.storeFork(o, d.Fork, f)
			o.known--
		}
		return c.newHandle(&handleRec{kind: handleOwner, rref: d.RRef}), nil
	}
	if _, dup := c.usersW().get(d.Fork); dup {
		c.refuse(from, rref.CodeCall, "fork %v received twice", d.Fork)
		return c.newHandle(&handleRec{kind: handleLost, rref: d.RRef, fork: d.Fork, lost: rref.ErrorKindBadRequest, owner: d.Owner}), nil
	}
	u := &userRec{state: rref.UserStart, owner: d.Owner, rref: d.RRef, fork: d.Fork, parent: d.Parent, parentW: from}
	c.usersW().put(d.Fork, u)
	u.handle = c.newHandle(&handleRec{kind: handleUser, rref: d.RRef, fork: d.Fork})
	switch {
	case c.dead.has(d.Owner):
		c.stepUser(u, rref.UserOnOwnerFailed)
	case parentIsOwner:
		c.stepUser(u, rref.UserOnConfirm) // the owner knew this fork when it sent it
	default:
		c.send(d.Owner, c.pools().forkRequest.fill(rref.ForkRequest{RRef: d.RRef, Fork: d.Fork, Parent: d.Parent}))
		if mutant(mutChildAcceptEarly) {
			c.send(from, c.pools().childAccept.fill(rref.ChildAccept{RRef: d.RRef, Child: d.Fork}))
		}
	}
	return u.handle, u
}

// settleRuns emits the runs that waited for u's confirmation.
func (c *Core) settleRuns(u *userRec) {
	runs := u.runs
	u.runs = nil
	for _, r := range runs {
		r.waiting--
		if r.waiting == 0 {
			c.ready.Runs = append(c.ready.Runs, r.run)
		}
	}
}

// Dup makes a second handle to the value behind h on this worker. On the
// owner it is one more local handle; elsewhere it is a child fork held by
// this same worker, confirmed by the owner like any fork (as a pass to self
// would be, without the call). A cut handle (lost, or its owner failed)
// gives a cut duplicate, as a pass to self would: a worker returns a handle
// it keeps by duplicating it, and refusing here made that return fail
// where the protocol lets a cut handle travel.
func (c *Core) Dup(h HandleID) (HandleID, error) {
	if err := c.checkPassable([]HandleID{h}); err != nil {
		return 0, err
	}
	hr := c.handles[h]
	if hr.kind == handleOwner || hr.kind == handleSelfFork {
		c.ownersW().at(hr.rref).local++
		return c.newHandle(&handleRec{kind: handleOwner, rref: hr.rref}), nil
	}
	d := c.fork(hr, c.self)
	nh, _ := c.receive(c.self, d)
	return nh, nil
}
