package core

import (
	"slices"

	"github.com/rrefkit/rref/generated/rref"
)

// Inventory is a copy of everything a core holds, record by record: the
// values it owns with the forks it knows, its UserRRefs with their
// machines' states, the children it has pinned, and the handles cut off
// from their values. It is the one walk of the core's tables for tools
// that show them: Held (the LeakError's picture) is a view of it, and
// the worker's Refs another. Nothing in it aliases the core's tables
// except value bytes, which the core never mutates.
type Inventory struct {
	Values     []ValueEntry     // by id
	References []ReferenceEntry // UserRRefs by fork, then cut handles by handle
	Pins       []PinEntry       // by child fork
}

// ValueEntry is one OwnerRRef.
type ValueEntry struct {
	RRef  RRefID
	State rref.OwnerState
	// Value is the value's bytes (nil before it is created, and when its
	// function failed): shared with the core, so read, never written.
	Value []byte
	// Failed is why the function that was to make the value failed (none
	// when it did not), with the application's code and the message.
	Failed            ErrorKind
	FailCode, FailMsg string
	// Local counts this worker's local handles to it (NewRRef, a handle
	// that came home, a Dup); Handles lists the program's handles to it
	// here, those and the owner's own fork from a Remote to itself.
	Local   int
	Handles []HandleID
	Forks   []ForkEntry // the forks it knows, by id: the references that keep it alive
	Waiting int         // fetches waiting for it to be created
}

// ForkEntry is a fork an owner knows.
type ForkEntry struct {
	Fork   ForkID
	Holder WorkerID
}

// ReferenceEntry is one UserRRef, or a handle cut off from its value
// with no record left (State then says why: lost or orphaned).
type ReferenceEntry struct {
	// Handle is the program's handle to it, 0 once the program released
	// it (the record stays while its delete waits for pins or fetches).
	Handle HandleID
	RRef   RRefID
	Fork   ForkID
	// Parent is the fork this one was copied from (the RRef's own id when
	// the owner handed it out; zero for the creator's fork of a Remote),
	// and ParentWorker the worker that sent it.
	Parent       ForkID
	ParentWorker WorkerID
	Owner        WorkerID
	State        rref.UserState
	// Cut is why it is cut off from its value (lost, owner failed, or a
	// bad request: the same fork received twice); none while it is not.
	Cut      ErrorKind
	TimedOut bool // its Remote was not confirmed within the driver's bound
	Pinned   int  // children lent and not yet answered (PinEntry)
	Fetching int  // fetches sent and not answered
	Runs     int  // functions waiting for its confirmation
}

// PinEntry is a child a UserRRef lent to another worker and keeps pinned
// until the owner has answered it (G2).
type PinEntry struct {
	Child  ForkID
	RRef   RRefID
	Parent ForkID // the lending UserRRef's fork
	To     WorkerID
	Owner  WorkerID
	State  rref.ChildPinState
}

// Inventory copies what the core holds.
func (c *Core) Inventory() Inventory {
	var inv Inventory
	var byValue map[RRefID][]HandleID // the program's handles to values owned here
	for _, h := range sortedHandles(c.handles) {
		if hr := c.handles[h]; hr.kind == handleOwner || hr.kind == handleSelfFork {
			if byValue == nil {
				byValue = map[RRefID][]HandleID{}
			}
			byValue[hr.rref] = append(byValue[hr.rref], h)
		}
	}
	for _, id := range sortedIDs(&c.owners) {
		o := c.owners.at(id)
		v := ValueEntry{RRef: id, State: o.state, Value: o.value, Failed: o.err, FailCode: o.errCode, FailMsg: o.errMsg,
			Local: o.local, Handles: byValue[id], Waiting: len(o.waiting)}
		for _, fid := range sortedIDs(&o.forks) {
			if f := o.forks.at(fid); f.state == rref.ForkKnown {
				v.Forks = append(v.Forks, ForkEntry{Fork: fid, Holder: f.holder})
			}
		}
		inv.Values = append(inv.Values, v)
	}
	for _, fid := range sortedIDs(&c.users) {
		u := c.users.at(fid)
		r := ReferenceEntry{RRef: u.rref, Fork: u.fork, Parent: u.parent, ParentWorker: u.parentW, Owner: u.owner,
			State: u.state, TimedOut: u.timedOut, Pinned: u.pinned, Fetching: u.fetching, Runs: len(u.runs)}
		if hr := c.handles[u.handle]; hr != nil && hr.kind == handleUser && hr.fork == u.fork {
			r.Handle = u.handle
		}
		switch u.state {
		case rref.UserLost:
			r.Cut = rref.ErrorKindLost
		case rref.UserOrphaned:
			r.Cut = rref.ErrorKindOwnerFailed
		}
		inv.References = append(inv.References, r)
	}
	for _, h := range sortedHandles(c.handles) {
		hr := c.handles[h]
		if hr.kind != handleLost {
			continue
		}
		state := rref.UserLost
		if hr.lost == rref.ErrorKindOwnerFailed {
			state = rref.UserOrphaned
		}
		inv.References = append(inv.References, ReferenceEntry{Handle: h, RRef: hr.rref, Fork: hr.fork, Owner: hr.owner, State: state, Cut: hr.lost})
	}
	for _, fid := range sortedIDs(&c.pins) {
		p := c.pins.at(fid)
		inv.Pins = append(inv.Pins, PinEntry{Child: fid, RRef: p.rref, Parent: p.parent, To: p.child, Owner: p.owner, State: p.state})
	}
	return inv
}

// Held lists what the core still holds: values with their holders, live
// references, pins. Values freed (tombstones) and references already
// released or cut off are not held.
func (c *Core) Held() []Held {
	inv := c.Inventory()
	var out []Held
	for _, v := range inv.Values {
		h := Held{Kind: HeldValue, RRef: v.RRef, Owner: c.self, Value: v.Value, Local: v.Local, Failed: v.Failed, FailMsg: v.FailMsg}
		for _, f := range v.Forks {
			if !slices.Contains(h.Holders, f.Holder) {
				h.Holders = append(h.Holders, f.Holder)
			}
		}
		slices.Sort(h.Holders)
		out = append(out, h)
	}
	for _, r := range inv.References {
		if r.State.IsFinal() {
			continue // released and deleted, or cut off (lost, orphaned): it keeps nothing alive
		}
		out = append(out, Held{Kind: HeldReference, RRef: r.RRef, Owner: r.Owner, Confirmed: r.State == rref.UserConfirmed})
	}
	for _, p := range inv.Pins {
		out = append(out, Held{Kind: HeldPin, RRef: p.RRef, Owner: p.Owner, To: p.To})
	}
	return out
}
