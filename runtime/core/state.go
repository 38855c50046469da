package core

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"hash/maphash"
	"strings"

	"github.com/rrefkit/rref/generated/rref"
	"github.com/rrefkit/rref/genrt"
)

// Clone returns an independent copy, for explorers that branch. It copies
// nothing at once: both cores share every table until each writes it (see
// cow.go). Values and messages are shared: the core never mutates them.
func (c *Core) Clone() *Core { return c.CloneInto(nil) }

// CloneInto is Clone made in d's memory, which it overwrites and returns:
// an explorer that is done with a copy reuses it for its next instead of
// allocating one. d must be a core that nothing uses any more; d == c
// (or nil) gets a new core.
func (c *Core) CloneInto(d *Core) *Core {
	if d == c || d == nil {
		d = new(Core)
	}
	c.shared = allTables
	*d = *c
	// The free lists of sent messages and the decoder's storage are the
	// original's: a clone starts its own, or both would fill one message.
	d.msgs = nil
	d.dec = nil
	d.ready = Ready{}
	return d
}

// AppendState appends a canonical encoding of the protocol state (not the
// counters of duplicates and bad input), so equal states encode equally.
// The id generator is encoded as the count of values drawn from it: cores
// compared are one core's clones, with one seed.
func (c *Core) AppendState(b []byte) []byte {
	b = c.appendHeader(b)
	for seg := range segments {
		b = c.appendTable(table(1)<<seg, b)
	}
	return b
}

// Digest is a 128-bit fingerprint of a state: two lanes of maphash with
// independent seeds. A collision merges two states an explorer tells
// apart; at 2^-128 a pair it is never the likeliest error.
type Digest [2]uint64

// digestSeeds are fixed for the process: every search in it, on any
// number of goroutines, fingerprints alike. Digests are not comparable
// across processes.
var digestSeeds = [2]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed()}

func digestOf(b []byte) Digest {
	return Digest{maphash.Bytes(digestSeeds[0], b), maphash.Bytes(digestSeeds[1], b)}
}

// digestScratch is the stack room a state digest is encoded in: a table of
// a few records fits, and a larger one grows onto the heap.
const digestScratch = 512

// StateDigest fingerprints the state AppendState encodes, for explorers
// that key their visited sets by state: equal states have equal digests in
// one process. Each table's digest is kept until the table is next written
// (its accessor, cow.go, drops it), so a step that changes one table or
// three rehashes those only.
func (c *Core) StateDigest() Digest {
	var scratch [digestScratch]byte
	for seg := range segments {
		if t := table(1) << seg; c.digested&t == 0 {
			c.digests[seg] = digestOf(c.appendTable(t, scratch[:0]))
			c.digested |= t
		}
	}
	return c.combine(scratch[:0])
}

// Forgotten is how many entries the core's bounded memories (freed
// values, deleted forks, early cancels) forgot to make room. The state
// encoding holds what they remember, not the order they would forget it
// in: two cores that encode alike may forget differently once full. An
// explorer that merges states by their encoding can trust it only while
// no core has forgotten anything.
func (c *Core) Forgotten() int { return c.tombs.forgot + c.goneForks.forgot + c.earlyCancels.forgot }

// RecomputeStateDigest is StateDigest with every table hashed anew and no
// cache read or written: an explorer's check that the cached digests are
// dropped whenever their table changes compares the two.
func (c *Core) RecomputeStateDigest() Digest {
	var scratch [digestScratch]byte
	fresh := *c
	for seg := range segments {
		fresh.digests[seg] = digestOf(c.appendTable(table(1)<<seg, scratch[:0]))
	}
	return fresh.combine(scratch[:0])
}

// combine digests the header and the tables' digests.
func (c *Core) combine(b []byte) Digest {
	b = c.appendHeader(b)
	for _, d := range c.digests {
		b = binary.LittleEndian.AppendUint64(b, d[0])
		b = binary.LittleEndian.AppendUint64(b, d[1])
	}
	return digestOf(b)
}

func (c *Core) appendHeader(b []byte) []byte {
	u := genrt.AppendUvarint
	b = u(b, uint64(c.self))
	b = u(b, c.drawn)
	b = u(b, c.nextLocal)
	return u(b, c.epoch)
}

// keysOnStack is how many keys of a table are sorted in an array on the
// stack: the tables of an explored state hold a few records; a larger one
// spills onto the heap.
const keysOnStack = 16

// appendTable appends the encoding of table t. Every field of every record
// is encoded (TestStateEncodingHasEveryField): the encoding is the core's
// state key, and two cores that encode alike must answer every input
// alike, as an explorer replays one's answer for the other. Twenty-two
// fields were once left out, among them a waiting run's call id, which
// such a replay showed.
func (c *Core) appendTable(t table, b []byte) []byte {
	u := genrt.AppendUvarint
	switch t {
	case tabOwners:
		b = u(b, uint64(c.owners.len()))
		var ids [keysOnStack]RRefID
		for _, id := range appendSortedIDs(ids[:0], &c.owners) {
			o := c.owners.at(id)
			b = rref.AppendRRefID(b, &id)
			b = append(b, byte(o.state), byte(o.err))
			b = genrt.AppendBytes(b, o.value)
			b = genrt.AppendString(b, o.errCode)
			b = genrt.AppendString(b, o.errMsg)
			b = u(b, uint64(o.local))
			b = u(b, uint64(o.known)) // counted from forks, but a bug may miscount it, and frees by it
			b = u(b, uint64(o.forks.len()))
			var fids [keysOnStack]ForkID
			for _, fid := range appendSortedIDs(fids[:0], &o.forks) {
				f := o.forks.at(fid)
				b = rref.AppendForkID(b, &fid)
				b = append(b, byte(f.state))
				b = u(b, uint64(f.holder))
			}
			b = u(b, uint64(len(o.waiting)))
			for _, w := range o.waiting {
				b = u(b, uint64(w.from))
				b = u(b, w.fetchID)
				b = u(b, uint64(w.handle))
				b = rref.AppendForkID(b, &w.fork)
			}
			b = rref.AppendForkID(b, &o.creator)
			b = genrt.AppendBool(b, o.ackHeld)
			b = u(b, c.awaiting.at(id)) // the tick it began awaiting in: 0 for any other
			b = u(b, uint64(len(o.charges)))
			for _, ch := range o.charges { // sorted by peer
				b = u(b, uint64(ch.peer))
				b = u(b, uint64(ch.n))
			}
		}
	case tabUsers:
		b = u(b, uint64(c.users.len()))
		var fids [keysOnStack]ForkID
		for _, fid := range appendSortedIDs(fids[:0], &c.users) {
			x := c.users.at(fid)
			b = rref.AppendForkID(b, &fid)
			b = append(b, byte(x.state))
			b = genrt.AppendBool(b, x.timedOut)
			b = u(b, uint64(x.owner))
			b = rref.AppendRRefID(b, &x.rref)
			b = rref.AppendForkID(b, &x.parent)
			b = u(b, uint64(x.parentW))
			b = u(b, uint64(x.handle))
			b = u(b, uint64(x.pinned))
			b = u(b, uint64(x.fetching))
			b = u(b, uint64(len(x.runs)))
			for _, r := range x.runs { // in the order they wait, which is the order they run in
				b = appendRun(b, r)
			}
		}
	case tabPins:
		b = u(b, uint64(c.pins.len()))
		var fids [keysOnStack]ForkID
		for _, fid := range appendSortedIDs(fids[:0], &c.pins) {
			p := c.pins.at(fid)
			b = rref.AppendForkID(b, &fid)
			b = append(b, byte(p.state))
			b = rref.AppendRRefID(b, &p.rref)
			b = rref.AppendForkID(b, &p.parent)
			b = u(b, uint64(p.child))
			b = u(b, uint64(p.owner))
		}
	case tabHandles:
		b = u(b, uint64(len(c.handles)))
		var hs [keysOnStack]HandleID
		for _, h := range appendSortedKeys(hs[:0], c.handles, cmp.Compare[HandleID]) {
			x := c.handles[h]
			b = u(b, uint64(h))
			b = append(b, byte(x.kind), byte(x.lost))
			b = rref.AppendRRefID(b, &x.rref)
			b = rref.AppendForkID(b, &x.fork)
			b = u(b, uint64(x.owner))
		}
	case tabFetches:
		b = u(b, uint64(len(c.fetches)))
		var ids [keysOnStack]uint64
		for _, id := range appendSortedKeys(ids[:0], c.fetches, cmp.Compare[uint64]) {
			f := c.fetches[id]
			b = u(b, id)
			b = u(b, uint64(f.handle))
			b = rref.AppendForkID(b, &f.fork)
		}
	case tabCalls:
		b = u(b, uint64(len(c.calls)))
		var ids [keysOnStack]uint64
		for _, id := range appendSortedKeys(ids[:0], c.calls, cmp.Compare[uint64]) {
			b = u(b, id)
			b = u(b, uint64(c.calls[id])) // the callee
		}
	case tabEarlyCancels:
		b = u(b, uint64(c.earlyCancels.m.len()))
		var keys [keysOnStack]callKey
		for _, k := range appendSortedIDs(keys[:0], &c.earlyCancels.m) {
			b = u(b, uint64(k.Worker))
			b = u(b, k.Local)
			deadline, _ := c.earlyCancels.get(k)
			b = genrt.AppendBool(b, deadline)
		}
	case tabDead:
		b = u(b, uint64(len(c.dead)))
		for _, w := range c.dead { // sorted
			b = u(b, uint64(w))
		}
	case tabTombs:
		b = u(b, uint64(c.tombs.m.len()))
		var ids [keysOnStack]RRefID
		for _, id := range appendSortedIDs(ids[:0], &c.tombs.m) {
			b = rref.AppendRRefID(b, &id)
			b = append(b, byte(c.tombs.m.at(id).kind))
		}
	case tabGoneForks:
		b = u(b, uint64(c.goneForks.m.len()))
		var fids [keysOnStack]ForkID
		for _, id := range appendSortedIDs(fids[:0], &c.goneForks.m) {
			b = rref.AppendForkID(b, &id)
		}
	}
	return b
}

// HandleState describes a handle for tools and tests.
type HandleState struct {
	Exists    bool
	RRef      RRefID
	Fork      ForkID
	IsOwner   bool // the value lives on this worker
	Owner     WorkerID
	Confirmed bool // a UserRRef the owner has confirmed (always true on the owner)
	Lost      ErrorKind
}

// Handle reports what h refers to.
func (c *Core) Handle(h HandleID) HandleState {
	hr := c.handles[h]
	if hr == nil {
		return HandleState{}
	}
	s := HandleState{Exists: true, RRef: hr.rref, Fork: hr.fork, Lost: hr.lost}
	switch hr.kind {
	case handleOwner, handleSelfFork:
		s.IsOwner, s.Confirmed, s.Owner = true, true, c.self
	case handleLost:
		s.Owner = hr.owner
	case handleUser:
		if u := c.users.at(hr.fork); u != nil {
			s.Owner = u.owner
			s.Confirmed = u.state == rref.UserConfirmed
			switch u.state {
			case rref.UserLost:
				s.Lost = rref.ErrorKindLost
			case rref.UserOrphaned:
				s.Lost = rref.ErrorKindOwnerFailed
			}
		}
	}
	return s
}

// Hot lists every machine in a hot state, as "machine id state": where a
// finished run must not rest.
func (c *Core) Hot() []string {
	var out []string
	for _, id := range sortedIDs(&c.owners) {
		o := c.owners.at(id)
		if o.state.IsHot() {
			out = append(out, fmt.Sprintf("Owner %s %s", fmtRRef(id), o.state))
		}
		for _, fid := range sortedIDs(&o.forks) {
			if f := o.forks.at(fid); f.state.IsHot() {
				out = append(out, fmt.Sprintf("Fork %s %s", fmtFork(fid), f.state))
			}
		}
	}
	for _, fid := range sortedIDs(&c.users) {
		if u := c.users.at(fid); u.state.IsHot() {
			out = append(out, fmt.Sprintf("User %s %s", fmtFork(fid), u.state))
		}
	}
	for _, fid := range sortedIDs(&c.pins) {
		if p := c.pins.at(fid); p.state.IsHot() {
			out = append(out, fmt.Sprintf("ChildPin %s %s", fmtFork(fid), p.state))
		}
	}
	return out
}

func fmtRRef(id RRefID) string { return fmt.Sprintf("%d:%d", id.Worker, id.Local) }
func fmtFork(id ForkID) string { return fmt.Sprintf("%d:%d", id.Worker, id.Local) }

// Dump describes the whole state, one record a line, in a stable order.
func (c *Core) Dump() string {
	var b strings.Builder
	for _, id := range sortedIDs(&c.owners) {
		o := c.owners.at(id)
		fmt.Fprintf(&b, "owner %s %s local=%d known=%d", fmtRRef(id), o.state, o.local, o.known)
		if o.err != rref.ErrorKindNone {
			fmt.Fprintf(&b, " err=%s", o.err)
		} else if o.state == rref.OwnerReady {
			fmt.Fprintf(&b, " value=%q", o.value)
		}
		if len(o.waiting) > 0 {
			fmt.Fprintf(&b, " waiting=%d", len(o.waiting))
		}
		if o.ackHeld {
			fmt.Fprintf(&b, " ack-held=%s", fmtFork(o.creator))
		}
		b.WriteString("\n")
		for _, fid := range sortedIDs(&o.forks) {
			f := o.forks.at(fid)
			fmt.Fprintf(&b, "  fork %s %s holder=%d\n", fmtFork(fid), f.state, f.holder)
		}
	}
	for _, fid := range sortedIDs(&c.users) {
		u := c.users.at(fid)
		fmt.Fprintf(&b, "user %s of %s %s owner=%d parent=%s", fmtFork(fid), fmtRRef(u.rref), u.state, u.owner, fmtFork(u.parent))
		if u.pinned > 0 {
			fmt.Fprintf(&b, " pinned=%d", u.pinned)
		}
		if u.fetching > 0 {
			fmt.Fprintf(&b, " fetching=%d", u.fetching)
		}
		if u.timedOut {
			b.WriteString(" timed-out")
		}
		b.WriteString("\n")
	}
	for _, fid := range sortedIDs(&c.pins) {
		p := c.pins.at(fid)
		fmt.Fprintf(&b, "pin %s parent=%s child=%d %s\n", fmtFork(fid), fmtFork(p.parent), p.child, p.state)
	}
	if c.tombs.m.len() > 0 {
		var ts []string
		for _, id := range sortedIDs(&c.tombs.m) {
			ts = append(ts, fmtRRef(id))
		}
		fmt.Fprintf(&b, "tombstones %s\n", strings.Join(ts, " "))
	}
	return b.String()
}

// FormatMessage renders a message compactly for traces and script tests.
func FormatMessage(m rref.Message) string {
	switch m := m.(type) {
	case *rref.Call:
		return fmt.Sprintf("Call{call=%d fn=%s args=%q%s}", m.CallID, m.Function, m.Args, fmtDescs(m.RRefs))
	case *rref.CallRet:
		return fmt.Sprintf("CallRet{call=%d err=%s result=%q%s}", m.CallID, m.Error, m.Result, fmtDescs(m.RRefs))
	case *rref.RemoteCall:
		return fmt.Sprintf("RemoteCall{rref=%s fork=%s fn=%s args=%q%s}", fmtRRef(m.RRef), fmtFork(m.Fork), m.Function, m.Args, fmtDescs(m.RRefs))
	case *rref.RemoteRet:
		return fmt.Sprintf("RemoteRet{rref=%s fork=%s}", fmtRRef(m.RRef), fmtFork(m.Fork))
	case *rref.FetchCall:
		return fmt.Sprintf("FetchCall{fetch=%d rref=%s fork=%s}", m.FetchID, fmtRRef(m.RRef), fmtFork(m.Fork))
	case *rref.FetchRet:
		confirms := ""
		if m.Confirms {
			confirms = " confirms"
		}
		if m.Error != rref.ErrorKindNone {
			return fmt.Sprintf("FetchRet{fetch=%d rref=%s err=%s%s}", m.FetchID, fmtRRef(m.RRef), m.Error, confirms)
		}
		return fmt.Sprintf("FetchRet{fetch=%d rref=%s value=%q%s}", m.FetchID, fmtRRef(m.RRef), m.Value, confirms)
	case *rref.ForkRequest:
		return fmt.Sprintf("ForkRequest{rref=%s fork=%s parent=%s}", fmtRRef(m.RRef), fmtFork(m.Fork), fmtFork(m.Parent))
	case *rref.ForkAck:
		return fmt.Sprintf("ForkAck{rref=%s fork=%s refused=%v}", fmtRRef(m.RRef), fmtFork(m.Fork), m.Refused)
	case *rref.ChildAccept:
		return fmt.Sprintf("ChildAccept{rref=%s child=%s refused=%v}", fmtRRef(m.RRef), fmtFork(m.Child), m.Refused)
	case *rref.UserDelete:
		return fmt.Sprintf("UserDelete{rref=%s fork=%s}", fmtRRef(m.RRef), fmtFork(m.Fork))
	case *rref.Error:
		return fmt.Sprintf("Error{kind=%s msg=%q}", m.Kind, m.Message)
	case *rref.CallCancel:
		return fmt.Sprintf("CallCancel{call=%d deadline=%v}", m.CallID, m.Deadline)
	}
	return fmt.Sprintf("%T", m)
}

func fmtDescs(ds []rref.RRefDesc) string {
	if len(ds) == 0 {
		return ""
	}
	var parts []string
	for _, d := range ds {
		parts = append(parts, fmt.Sprintf("%s/%s<-%s", fmtRRef(d.RRef), fmtFork(d.Fork), fmtFork(d.Parent)))
	}
	return " rrefs=[" + strings.Join(parts, " ") + "]"
}

// HeldKind says what a Held record is.
type HeldKind uint8

const (
	HeldValue     HeldKind = iota + 1 // a value this worker owns
	HeldReference                     // a UserRRef: this worker's reference to a value elsewhere
	HeldPin                           // a copy of a reference lent to another worker, not yet confirmed
)

// Held is one reference a core still holds, for reports of what leaked.
type Held struct {
	Kind  HeldKind
	RRef  RRefID
	Owner WorkerID
	// HeldValue: the value's bytes (nil before it is created), the
	// program's own handles to it, and the workers whose forks keep it
	// alive, sorted and each once.
	Value   []byte
	Local   int
	Holders []WorkerID
	// Failed: why the function that was to make the value failed (its
	// kind, none when it did not, and its message).
	Failed  ErrorKind
	FailMsg string
	// HeldReference: the owner has confirmed it.
	Confirmed bool
	// HeldPin: the worker the copy went to.
	To WorkerID
}

// appendRun encodes a run waiting for forks to be confirmed.
func appendRun(b []byte, r *pendingRun) []byte {
	u := genrt.AppendUvarint
	b = u(b, uint64(r.waiting))
	b = append(b, byte(r.run.Kind))
	b = u(b, uint64(r.run.From))
	b = u(b, r.run.CallID)
	b = rref.AppendRRefID(b, &r.run.RRef)
	b = genrt.AppendString(b, r.run.Fn)
	b = genrt.AppendBytes(b, r.run.Args)
	b = u(b, uint64(len(r.run.Handles)))
	for _, h := range r.run.Handles {
		b = u(b, uint64(h))
	}
	b = u(b, uint64(r.run.Timeout))
	b = genrt.AppendBool(b, r.run.Cancelled)
	b = genrt.AppendBool(b, r.run.PastDeadline)
	b = u(b, uint64(len(r.run.Meta)))
	for i := range r.run.Meta {
		b = rref.AppendMetaEntry(b, &r.run.Meta[i])
	}
	return b
}
