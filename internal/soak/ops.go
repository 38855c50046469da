package soak

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rrefkit/rref/runtime/worker"
)

// Every value the traffic carries is computed from (seed, round, member,
// client, operation counter) and pure functions of it, so the caller knows
// what each result must be, whatever path it took.

// mix is splitmix64's finalizer: a bijection with full avalanche, so a
// value that went through the wrong function, or a wrong value, shows.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// mix2 is what a member that fetched v answers for a salt: the caller
// learns both that the value was right and that the fetch happened there.
func mix2(v, salt uint64) uint64 { return mix(v ^ mix(salt)) }

// opStream is the second PCG word of one operation's random stream.
func opStream(round, member, client int, op uint64) uint64 {
	return mix(uint64(round)<<48 ^ uint64(member)<<40 ^ uint64(client)<<32 ^ op)
}

// Functions every member registers.
const (
	fnAdd     = "add"     // [2]uint64 -> sum
	fnMix     = "mix"     // x -> mix(x): a Remote's value
	fnMake    = "make"    // x -> an RRef, owned by the callee, to mix(x)
	fnFetch   = "fetch"   // refArg -> mix2(value, salt), fetched by the callee
	fnForward = "forward" // fwdArg -> passed on along Via, fetched by the last
	fnHand    = "hand"    // handArg -> the RRef back from a call to To's keep
	fnKeep    = "keep"    // an RRef -> the same RRef
	fnClone   = "clone"   // refArg -> a clone fetched beside the original
	fnHold    = "hold"    // holdArg -> kept by the callee until unhold
	fnHeldGet = "heldget" // key -> mix2(held value, key)
	fnUnhold  = "unhold"  // key -> the hold released
)

type refArg struct {
	Ref  *worker.RRef[uint64]
	Salt uint64
}

type fwdArg struct {
	Ref  *worker.RRef[uint64]
	Via  []string
	Salt uint64
}

type handArg struct {
	Ref *worker.RRef[uint64]
	To  string
}

type holdArg struct {
	Key    uint64
	Placer int
	Ref    *worker.RRef[uint64]
}

// Markers in an error's text, which crosses members as a string only
// (worker.UserError): a function reports a wrong value or a hung inner
// call with them, so the caller classifies what happened further down.
const (
	markWrong = "soak-wrong:"
	markHung  = "soak-hung:"
)

// innerErr marks an inner call's error for the caller (see classify).
func innerErr(what string, err error) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%s %s: %w", markHung, what, err)
	}
	return fmt.Errorf("soak: %s: %w", what, err)
}

// wrongError is a value that differs from the one it must have.
type wrongError struct{ msg string }

func (e *wrongError) Error() string { return markWrong + " " + e.msg }

func expect(got, want uint64, what string) error {
	if got != want {
		return &wrongError{fmt.Sprintf("%s: got %#x, want %#x", what, got, want)}
	}
	return nil
}

// classify sorts an operation's error (see the class constants).
func classify(err error) string {
	msg := err.Error()
	var ue *worker.UserError
	if errors.As(err, &ue) {
		msg += " " + ue.Message
	}
	switch {
	case strings.Contains(msg, markWrong):
		return classWrong
	case errors.Is(err, worker.ErrFenced):
		// This member fenced: whatever the fence's reason quotes (a
		// deadline among them), the parent checks the group's verdict.
		return classPeer
	case errors.Is(err, context.DeadlineExceeded) || strings.Contains(msg, markHung) ||
		strings.Contains(msg, context.DeadlineExceeded.Error()):
		return classHung
	case errors.Is(err, worker.ErrPeerFailed) || errors.Is(err, worker.ErrOwnerFailed) || errors.Is(err, worker.ErrLost):
		return classPeer
	case ue != nil && (strings.Contains(ue.Message, worker.ErrPeerFailed.Error()) ||
		strings.Contains(ue.Message, worker.ErrOwnerFailed.Error()) || strings.Contains(ue.Message, worker.ErrLost.Error())):
		// A peer failure further down a chain, carried back as text.
		return classPeer
	}
	return classOther
}

// Runtime calls counted, by kind.
const (
	primCall     = "Call"
	primGo       = "Go"
	primRemote   = "Remote"
	primToHere   = "ToHere"
	primNewRRef  = "NewRRef"
	primClone    = "Clone"
	primRelease  = "Release"
	primRRefArg  = "RRef argument"
	primRRefBack = "RRef result"
)

var allPrims = []string{primCall, primGo, primRemote, primToHere, primNewRRef, primClone, primRelease, primRRefArg, primRRefBack}

type primCounts struct{ m map[string]*atomic.Uint64 }

func newPrimCounts() primCounts {
	p := primCounts{m: map[string]*atomic.Uint64{}}
	for _, k := range allPrims {
		p.m[k] = new(atomic.Uint64)
	}
	return p
}

func (p primCounts) add(kind string) { p.m[kind].Add(1) }

func (p primCounts) snapshot() map[string]uint64 {
	out := map[string]uint64{}
	for k, v := range p.m {
		out[k] = v.Load()
	}
	return out
}

// holds are the RRefs a member keeps for others (fnHold).
type holds struct {
	mu sync.Mutex
	m  map[uint64]heldRef
}

type heldRef struct {
	ref    *worker.RRef[uint64]
	placer int
}

// setup registers the traffic's functions on w before any peer connects.
func (m *member) setup(w *worker.Worker) {
	inner := func(ctx context.Context) (context.Context, context.CancelFunc) {
		return context.WithTimeout(ctx, m.cfg.InnerDeadline)
	}
	worker.Register(w, fnAdd, func(ctx context.Context, x [2]uint64) (uint64, error) {
		return m.injectAdd(ctx, x[0]+x[1])
	})
	worker.Register(w, fnMix, func(ctx context.Context, x uint64) (uint64, error) { return mix(x), nil })
	worker.Register(w, fnMake, func(ctx context.Context, x uint64) (*worker.RRef[uint64], error) {
		m.prims.add(primNewRRef)
		m.prims.add(primRRefBack)
		return worker.NewRRef(w, mix(x))
	})
	fetch := func(ctx context.Context, r *worker.RRef[uint64], salt uint64) (uint64, error) {
		ictx, cancel := inner(ctx)
		defer cancel()
		m.prims.add(primToHere)
		v, err := r.ToHere(ictx)
		if err != nil {
			return 0, innerErr("fetch from "+r.Owner(), err)
		}
		return mix2(v, salt), nil
	}
	worker.Register(w, fnFetch, func(ctx context.Context, a refArg) (uint64, error) { return fetch(ctx, a.Ref, a.Salt) })
	worker.Register(w, fnForward, func(ctx context.Context, a fwdArg) (uint64, error) {
		if len(a.Via) == 0 {
			return fetch(ctx, a.Ref, a.Salt)
		}
		ictx, cancel := inner(ctx)
		defer cancel()
		m.prims.add(primCall)
		m.prims.add(primRRefArg)
		v, err := worker.Call[uint64](ictx, w, a.Via[0], fnForward, fwdArg{Ref: a.Ref, Via: a.Via[1:], Salt: a.Salt})
		if err != nil {
			return 0, innerErr("forward to "+a.Via[0], err)
		}
		return v, nil
	})
	worker.Register(w, fnHand, func(ctx context.Context, a handArg) (*worker.RRef[uint64], error) {
		ictx, cancel := inner(ctx)
		defer cancel()
		m.prims.add(primCall)
		m.prims.add(primRRefArg)
		m.prims.add(primRRefBack)
		r, err := worker.Call[*worker.RRef[uint64]](ictx, w, a.To, fnKeep, a.Ref)
		if err != nil {
			return nil, innerErr("hand to "+a.To, err)
		}
		return r, nil
	})
	worker.Register(w, fnKeep, func(ctx context.Context, r *worker.RRef[uint64]) (*worker.RRef[uint64], error) {
		m.prims.add(primRRefBack)
		return r, nil
	})
	worker.Register(w, fnClone, func(ctx context.Context, a refArg) (uint64, error) {
		ictx, cancel := inner(ctx)
		defer cancel()
		m.prims.add(primClone)
		c, err := a.Ref.Clone()
		if err != nil {
			return 0, innerErr("clone", err)
		}
		defer func() { m.prims.add(primRelease); c.Release() }()
		m.prims.add(primToHere)
		v1, err := a.Ref.ToHere(ictx)
		if err != nil {
			return 0, innerErr("fetch the original from "+a.Ref.Owner(), err)
		}
		m.prims.add(primToHere)
		v2, err := c.ToHere(ictx)
		if err != nil {
			return 0, innerErr("fetch the clone from "+c.Owner(), err)
		}
		if err := expect(v2, v1, "a clone's value beside its original's"); err != nil {
			return 0, err
		}
		return mix2(v2, a.Salt), nil
	})
	worker.Register(w, fnHold, func(ctx context.Context, a holdArg) (uint64, error) {
		m.held.mu.Lock()
		defer m.held.mu.Unlock()
		if _, dup := m.held.m[a.Key]; dup {
			return 0, &wrongError{fmt.Sprintf("hold key %#x placed twice", a.Key)}
		}
		m.held.m[a.Key] = heldRef{ref: a.Ref.Keep(), placer: a.Placer}
		return 0, nil
	})
	worker.Register(w, fnHeldGet, func(ctx context.Context, key uint64) (uint64, error) {
		m.held.mu.Lock()
		h, ok := m.held.m[key]
		m.held.mu.Unlock()
		if !ok {
			return 0, &wrongError{fmt.Sprintf("no hold under key %#x", key)}
		}
		return fetch(ctx, h.ref, key)
	})
	worker.Register(w, fnUnhold, func(ctx context.Context, key uint64) (uint64, error) {
		m.held.mu.Lock()
		h, ok := m.held.m[key]
		delete(m.held.m, key)
		m.held.mu.Unlock()
		if !ok {
			return 0, &wrongError{fmt.Sprintf("no hold under key %#x to release", key)}
		}
		// The value is fetched once more before the release, so that a hold
		// that came to refer to another value (or to none) while faults
		// went on is caught even when nothing fetched it meanwhile; it is
		// released whatever the fetch says.
		v, err := fetch(ctx, h.ref, key)
		m.prims.add(primRelease)
		h.ref.Release()
		if m.cfg.Inject == InjectWrongUnhold && err == nil && m.injected.CompareAndSwap(false, true) {
			v++
		}
		return v, err
	})
}

// injectAdd is fnAdd's result, misbehaving once if asked to (Inject).
func (m *member) injectAdd(ctx context.Context, sum uint64) (uint64, error) {
	switch m.cfg.Inject {
	case InjectWrong, InjectFail, InjectHang:
	default:
		return sum, nil
	}
	if !m.injected.CompareAndSwap(false, true) {
		return sum, nil
	}
	switch m.cfg.Inject {
	case InjectWrong:
		return sum + 1, nil
	case InjectFail:
		return 0, errors.New("soak: injected failure")
	}
	time.Sleep(m.cfg.HangFor)
	return sum, nil
}

// Operation kinds, and how often each is picked (out of the weights' sum).
const (
	opCall      = "call"       // Call add on B
	opGo        = "go"         // several Go add at once, on random members
	opRemote    = "remote"     // Remote mix on B, ToHere
	opPassOwn   = "pass-own"   // NewRRef here, passed to B, which fetches it
	opPassThird = "pass-third" // Remote on B, passed to C, which fetches from B
	opReturn    = "return"     // an RRef made and returned by B, fetched, passed to C
	opNested    = "nested"     // an RRef forwarded along a chain of members, fetched by the last
	opHand      = "hand"       // an RRef passed to C, which hands it to D and returns D's answer
	opClone     = "clone"      // Clone, the original released, the clone passed on and cloned again
	opHold      = "hold"       // an RRef left with B for later
	opHeld      = "held"       // one left earlier fetched by its holder
	opUnhold    = "unhold"     // one left earlier released by its holder
)

var opWeights = []struct {
	kind   string
	weight int
}{
	{opCall, 3}, {opGo, 2}, {opRemote, 2}, {opPassOwn, 2}, {opPassThird, 2}, {opReturn, 2},
	{opNested, 2}, {opHand, 1}, {opClone, 1}, {opHold, 1}, {opHeld, 1}, {opUnhold, 1},
}

var allOps = func() []string {
	var out []string
	for _, w := range opWeights {
		out = append(out, w.kind)
	}
	return out
}()

var opWeightSum = func() int {
	n := 0
	for _, w := range opWeights {
		n += w.weight
	}
	return n
}()

func pickOp(rng *rand.Rand) string {
	n := rng.IntN(opWeightSum)
	for _, w := range opWeights {
		if n < w.weight {
			return w.kind
		}
		n -= w.weight
	}
	return opCall
}

const (
	maxGoAtOnce = 4 // futures outstanding in one go operation
	maxVia      = 3 // members a nested RRef is forwarded through
	// maxHolds per client: enough that holders keep references across
	// stops and kills, few enough that the unhold pass at the end is short.
	maxHolds = 8
)

// holding is an RRef this client left with a holder.
type holding struct {
	key, value uint64
	holder     int
}

// op is one operation in progress.
type op struct {
	c        *client
	rng      *rand.Rand
	involved uint64
}

func (o *op) name(i int) string {
	o.involved |= 1 << uint(i)
	return o.c.m.cfg.Names[i]
}

// other picks a live member other than this one and those in not (when
// none is left, a member already used serves again; when every other
// member is dead, one of them, so that the operation fails as it must:
// this worker can take its peers for dead in the middle of an operation).
func (o *op) other(not ...int) int {
	m := o.c.m
	var cands, fallback []int
	for i := range m.cfg.Names {
		if i == m.cfg.Self || m.isDead(i) {
			continue
		}
		fallback = append(fallback, i)
		used := false
		for _, n := range not {
			used = used || n == i
		}
		if !used {
			cands = append(cands, i)
		}
	}
	if len(cands) == 0 {
		cands = fallback
	}
	if len(cands) == 0 {
		for i := range m.cfg.Names {
			if i != m.cfg.Self {
				cands = append(cands, i)
			}
		}
	}
	return cands[o.rng.IntN(len(cands))]
}

// anyone picks any live member, this one included.
func (o *op) anyone() int {
	if o.rng.IntN(len(o.c.m.cfg.Names)) == 0 {
		return o.c.m.cfg.Self
	}
	if i := o.other(); i >= 0 {
		return i
	}
	return o.c.m.cfg.Self
}

// source makes the RRef an operation passes around: a Remote on owner, or
// a value of this member's own when owner is this member.
func (o *op) source(ctx context.Context, owner int) (*worker.RRef[uint64], uint64, error) {
	x := o.rng.Uint64()
	m := o.c.m
	if owner == m.cfg.Self {
		m.prims.add(primNewRRef)
		r, err := worker.NewRRef(m.w, x)
		return r, x, err
	}
	m.prims.add(primRemote)
	r, err := worker.Remote[uint64](ctx, m.w, o.name(owner), fnMix, x)
	return r, mix(x), err
}

func (o *op) release(r *worker.RRef[uint64]) {
	o.c.m.prims.add(primRelease)
	r.Release()
}

func (o *op) call(ctx context.Context, to int, fn string, arg any) (uint64, error) {
	m := o.c.m
	m.prims.add(primCall)
	switch a := arg.(type) {
	case [2]uint64:
		return worker.Call[uint64](ctx, m.w, o.name(to), fn, a)
	case uint64:
		return worker.Call[uint64](ctx, m.w, o.name(to), fn, a)
	case refArg:
		m.prims.add(primRRefArg)
		return worker.Call[uint64](ctx, m.w, o.name(to), fn, a)
	case fwdArg:
		m.prims.add(primRRefArg)
		return worker.Call[uint64](ctx, m.w, o.name(to), fn, a)
	case holdArg:
		m.prims.add(primRRefArg)
		return worker.Call[uint64](ctx, m.w, o.name(to), fn, a)
	}
	return 0, fmt.Errorf("soak: no call for an argument of type %T", arg)
}

// run performs one operation of kind and checks its result.
func (o *op) run(ctx context.Context, kind string) error {
	m := o.c.m
	self := m.cfg.Self
	o.name(self)
	if !m.anyPeerAlive() && kind != opUnhold && kind != opHeld {
		return errNoPeer
	}
	b := o.other()
	switch kind {
	case opCall:
		x, y := o.rng.Uint64(), o.rng.Uint64()
		got, err := o.call(ctx, b, fnAdd, [2]uint64{x, y})
		if err != nil {
			return err
		}
		return expect(got, x+y, "add on "+m.cfg.Names[b])

	case opGo:
		type pending struct {
			f    *worker.Future[uint64]
			want uint64
			to   string
		}
		var fs []pending
		for range 1 + o.rng.IntN(maxGoAtOnce) {
			to := o.name(o.other())
			x, y := o.rng.Uint64(), o.rng.Uint64()
			m.prims.add(primGo)
			fs = append(fs, pending{worker.Go[uint64](ctx, m.w, to, fnAdd, [2]uint64{x, y}), x + y, to})
		}
		var errs []error
		for _, p := range fs {
			got, err := p.f.Wait(ctx)
			if err == nil {
				err = expect(got, p.want, "go add on "+p.to)
			}
			if err != nil {
				errs = append(errs, err)
			}
		}
		return errors.Join(errs...)

	case opRemote:
		r, want, err := o.source(ctx, b)
		if err != nil {
			return err
		}
		defer o.release(r)
		m.prims.add(primToHere)
		v, err := r.ToHere(ctx)
		if err != nil {
			return err
		}
		return expect(v, want, "remote mix on "+m.cfg.Names[b])

	case opPassOwn:
		r, want, err := o.source(ctx, self)
		if err != nil {
			return err
		}
		defer o.release(r)
		salt := o.rng.Uint64()
		got, err := o.call(ctx, b, fnFetch, refArg{Ref: r, Salt: salt})
		if err != nil {
			return err
		}
		return expect(got, mix2(want, salt), "own value fetched by "+m.cfg.Names[b])

	case opPassThird:
		c := o.other(b)
		r, want, err := o.source(ctx, b)
		if err != nil {
			return err
		}
		defer o.release(r)
		salt := o.rng.Uint64()
		got, err := o.call(ctx, c, fnFetch, refArg{Ref: r, Salt: salt})
		if err != nil {
			return err
		}
		return expect(got, mix2(want, salt), fmt.Sprintf("value of %s fetched by %s", m.cfg.Names[b], m.cfg.Names[c]))

	case opReturn:
		c := o.other(b)
		x := o.rng.Uint64()
		m.prims.add(primCall)
		r, err := worker.Call[*worker.RRef[uint64]](ctx, m.w, o.name(b), fnMake, x)
		if err != nil {
			return err
		}
		defer o.release(r)
		if r.Owner() != m.cfg.Names[b] {
			return &wrongError{fmt.Sprintf("an RRef made on %s is owned by %s", m.cfg.Names[b], r.Owner())}
		}
		m.prims.add(primToHere)
		v, err := r.ToHere(ctx)
		if err != nil {
			return err
		}
		if err := expect(v, mix(x), "RRef returned by "+m.cfg.Names[b]); err != nil {
			return err
		}
		salt := o.rng.Uint64()
		got, err := o.call(ctx, c, fnFetch, refArg{Ref: r, Salt: salt})
		if err != nil {
			return err
		}
		return expect(got, mix2(mix(x), salt), "returned RRef passed on to "+m.cfg.Names[c])

	case opNested:
		owner := self
		if o.rng.IntN(2) == 0 {
			owner = b
		}
		r, want, err := o.source(ctx, owner)
		if err != nil {
			return err
		}
		defer o.release(r)
		var via []string
		for range 1 + o.rng.IntN(maxVia) {
			via = append(via, o.name(o.anyone()))
		}
		first := o.other(owner)
		salt := o.rng.Uint64()
		got, err := o.call(ctx, first, fnForward, fwdArg{Ref: r, Via: via, Salt: salt})
		if err != nil {
			return err
		}
		return expect(got, mix2(want, salt), fmt.Sprintf("value of %s forwarded via %s, %v", m.cfg.Names[owner], m.cfg.Names[first], via))

	case opHand:
		c := o.other(b)
		d := o.anyone()
		r, want, err := o.source(ctx, b)
		if err != nil {
			return err
		}
		defer o.release(r)
		m.prims.add(primCall)
		m.prims.add(primRRefArg)
		back, err := worker.Call[*worker.RRef[uint64]](ctx, m.w, o.name(c), fnHand, handArg{Ref: r, To: o.name(d)})
		if err != nil {
			return err
		}
		defer o.release(back)
		if back.Owner() != m.cfg.Names[b] {
			return &wrongError{fmt.Sprintf("an RRef of %s came back owned by %s", m.cfg.Names[b], back.Owner())}
		}
		m.prims.add(primToHere)
		v, err := back.ToHere(ctx)
		if err != nil {
			return err
		}
		return expect(v, want, fmt.Sprintf("value of %s handed back by %s from %s", m.cfg.Names[b], m.cfg.Names[c], m.cfg.Names[d]))

	case opClone:
		c := o.other(b)
		owner := b
		if o.rng.IntN(2) == 0 {
			owner = self
		}
		r, want, err := o.source(ctx, owner)
		if err != nil {
			return err
		}
		m.prims.add(primClone)
		cl, err := r.Clone()
		o.release(r) // the clone must keep the value alive on its own
		if err != nil {
			return err
		}
		defer o.release(cl)
		salt := o.rng.Uint64()
		got, err := o.call(ctx, c, fnClone, refArg{Ref: cl, Salt: salt})
		if err != nil {
			return err
		}
		if err := expect(got, mix2(want, salt), "clone cloned again by "+m.cfg.Names[c]); err != nil {
			return err
		}
		m.prims.add(primToHere)
		v, err := cl.ToHere(ctx)
		if err != nil {
			return err
		}
		return expect(v, want, "clone of a released original")

	case opHold:
		if len(o.c.holdings) >= maxHolds {
			return o.run(ctx, opUnhold)
		}
		r, want, err := o.source(ctx, self)
		if err != nil {
			return err
		}
		key := o.rng.Uint64()
		_, err = o.call(ctx, b, fnHold, holdArg{Key: key, Placer: self, Ref: r})
		o.release(r) // the holder's fork keeps it alive
		if err != nil {
			return err
		}
		o.c.holdings = append(o.c.holdings, holding{key: key, value: want, holder: b})
		return nil

	case opHeld, opUnhold:
		if len(o.c.holdings) == 0 {
			return o.run(ctx, opHold)
		}
		i := o.rng.IntN(len(o.c.holdings))
		h := o.c.holdings[i]
		if kind == opUnhold {
			o.c.holdings = append(o.c.holdings[:i], o.c.holdings[i+1:]...)
			got, err := o.call(ctx, h.holder, fnUnhold, h.key)
			if err != nil {
				return err
			}
			return expect(got, mix2(h.value, h.key), "value released by "+m.cfg.Names[h.holder])
		}
		got, err := o.call(ctx, h.holder, fnHeldGet, h.key)
		if err != nil {
			o.c.holdings = append(o.c.holdings[:i], o.c.holdings[i+1:]...)
			return err
		}
		return expect(got, mix2(h.value, h.key), "value held by "+m.cfg.Names[h.holder])
	}
	return fmt.Errorf("soak: unknown operation %q", kind)
}

// errNoPeer: every other member is dead; the operation is skipped.
var errNoPeer = errors.New("soak: no live peer")
