package worker

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rrefkit/rref/fifo"
	groupwire "github.com/rrefkit/rref/generated/group"
	"github.com/rrefkit/rref/runtime/core"
)

// The group as Start is given it: each member's transport, the view every
// member must share, which end of each link dials, and the hello both ends
// of a new link exchange to prove they belong to the same group.

// Errors of a group's membership, matched with errors.Is.
var (
	// ErrGroupMismatch: two members were started with different member
	// lists (names, order or transports). Both refuse the link: run on,
	// they would disagree on which worker owns which value.
	ErrGroupMismatch = errors.New("worker: members started with different groups")
	// ErrNotAdmitted: a member refused this member's link (a name already
	// connected there, a group already running, a hello it could not take).
	ErrNotAdmitted = errors.New("worker: not admitted to the group")
	// ErrBadGroup: the peer list given to Start cannot make a group.
	ErrBadGroup = errors.New("worker: invalid group")
)

// helloTimeout bounds the wait for a hello on a link that has passed the
// transport's handshake: its peer has proved the secret and sends its hello
// at once, so a longer silence is a broken or hostile member, and accepting
// must go on beside it. As the transport's own handshake bound (5 s).
const helloTimeout = 5 * time.Second

// transportKind is how a member is reached.
type transportKind uint8

const (
	kindTCP transportKind = iota + 1
	kindSHM
	kindFabric
)

// memberAddr is a member's parsed Peer.Addr.
type memberAddr struct {
	kind     transportKind
	shmGroup string // kindSHM: the members sharing memory with each other
	provider string // kindFabric: the libfabric provider, "" for its default
	hostPort string // kindTCP, kindFabric: where the member accepts
}

func parseMemberAddr(addr string) (memberAddr, error) {
	switch {
	case addr == "":
		return memberAddr{}, errors.New("an empty address (want host:port, shm:GROUP or fabric:host:port)")
	case isSHM(addr):
		g := strings.TrimPrefix(addr, "shm:")
		if g == "" {
			return memberAddr{}, fmt.Errorf("%q names no shared-memory group (want shm:GROUP)", addr)
		}
		if strings.IndexByte(g, 0) >= 0 {
			return memberAddr{}, fmt.Errorf("%q: a shared-memory group name cannot hold a NUL byte", addr)
		}
		return memberAddr{kind: kindSHM, shmGroup: g}, nil
	case isFabric(addr):
		provider, hostPort, err := parseFabricAddr(addr)
		if err != nil {
			return memberAddr{}, err
		}
		return memberAddr{kind: kindFabric, provider: provider, hostPort: hostPort}, nil
	case strings.HasPrefix(addr, "mem:"):
		return memberAddr{}, fmt.Errorf("%q: the mem transport joins workers of one process only (NewGroup), not members Start connects", addr)
	}
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return memberAddr{}, fmt.Errorf("%q is not host:port, shm:GROUP or fabric:host:port: %w", addr, err)
	}
	if p, err := strconv.ParseUint(port, 10, 16); err != nil || p == 0 {
		return memberAddr{}, fmt.Errorf("%q: the port must be a number from 1 to 65535 (members dial it)", addr)
	}
	return memberAddr{kind: kindTCP, hostPort: addr}, nil
}

// viewOf is how a member's transport shows in the group's view. A tcp
// member's host is left out: two hosts may name one member differently
// (a host name on one, an address on another) and still reach it.
func (a memberAddr) viewOf() string {
	switch a.kind {
	case kindSHM:
		return "shm:" + quoteIfNeeded(a.shmGroup)
	case kindFabric:
		if a.provider != "" {
			return "fabric:" + quoteIfNeeded(a.provider)
		}
		return "fabric"
	default:
		return "tcp"
	}
}

// quoteIfNeeded quotes s when it holds a character that would make a view
// ambiguous (the separators ' ' and '=', a quote, anything unprintable).
func quoteIfNeeded(s string) string {
	for _, r := range s {
		if r <= ' ' || r == '=' || r == '"' || r == '\\' || !strconv.IsPrint(r) {
			return strconv.Quote(s)
		}
	}
	return s
}

// linkRole is what one end of a link does to make it.
type linkRole uint8

const (
	roleCreate linkRole = iota + 1 // both ends share memory, and this end creates it
	roleAttach                     // both ends share memory, and the other end creates it
	roleDial                       // this end dials the other's listener
	roleAccept                     // the other end dials this one
)

// groupPlan is a validated peer list: names, transports, the view and the
// group's identity, computed once by Start.
type groupPlan struct {
	names    []string
	addrs    []memberAddr
	view     string // canonical: "a=tcp b=shm:x"
	identity []byte // HMAC-SHA256 of view under the secret
	// byName is the members' indices in the order of their names: the
	// order in which each member makes its links, and which decides who
	// dials, so that members meet on every link whatever order each was
	// given the list in (and then refuse a list that differs).
	byName []int
}

// planGroup checks that peers can make a group, whatever their order and
// mix of transports, and computes its view.
func planGroup(peers []Peer, secret []byte) (*groupPlan, error) {
	if len(peers) == 0 {
		return nil, fmt.Errorf("%w: no members", ErrBadGroup)
	}
	g := &groupPlan{names: make([]string, len(peers)), addrs: make([]memberAddr, len(peers))}
	for i, p := range peers {
		g.names[i] = p.Name
	}
	if err := checkNames(g.names); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadGroup, err)
	}
	var shmMember, shmGroup string // the first shm member seen, and its group
	for i, p := range peers {
		a, err := parseMemberAddr(p.Addr)
		if err != nil {
			return nil, fmt.Errorf("%w: member %s: %v", ErrBadGroup, p.Name, err)
		}
		g.addrs[i] = a
		if (a.kind == kindFabric) != (g.addrs[0].kind == kindFabric) {
			return nil, fmt.Errorf("%w: %s (%s) and %s (%s): a group is on libfabric whole or not at all", ErrBadGroup, peers[0].Name, peers[0].Addr, p.Name, p.Addr)
		}
		if a.kind == kindSHM {
			if shmMember != "" && a.shmGroup != shmGroup {
				// Neither accepts tcp, and they share no memory: no link
				// can join them.
				return nil, fmt.Errorf("%w: %s (shm:%s) and %s (%s) cannot connect: shared memory links the members of one shm group, and neither member accepts tcp", ErrBadGroup, shmMember, shmGroup, p.Name, p.Addr)
			}
			shmMember, shmGroup = p.Name, a.shmGroup
		}
	}
	var b strings.Builder
	for i, a := range g.addrs {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(quoteIfNeeded(g.names[i]))
		b.WriteByte('=')
		b.WriteString(a.viewOf())
	}
	g.view = b.String()
	g.byName = make([]int, len(g.names))
	for i := range g.byName {
		g.byName[i] = i
	}
	slices.SortFunc(g.byName, func(a, b int) int { return strings.Compare(g.names[a], g.names[b]) })
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte(g.view))
	g.identity = mac.Sum(nil)
	return g, nil
}

// role is what member a does to make its link with member b. Members of
// one shm group share memory, and the one whose name sorts first creates
// it. Otherwise the link is tcp (or fabric): a member on shared memory
// alone dials (it has nowhere to accept), and of two that accept, the one
// whose name sorts last dials. Names decide rather than the list's order,
// so that two members given the list in different orders still meet, and
// refuse each other with both lists in the error instead of waiting for
// each other until their deadlines.
func (g *groupPlan) role(a, b int) linkRole {
	ka, kb := g.addrs[a].kind, g.addrs[b].kind
	first := g.names[a] < g.names[b]
	switch {
	case ka == kindSHM && kb == kindSHM && first:
		return roleCreate
	case ka == kindSHM && kb == kindSHM:
		return roleAttach
	case ka == kindSHM:
		return roleDial
	case kb == kindSHM:
		return roleAccept
	case first:
		return roleAccept
	default:
		return roleDial
	}
}

// shmLinkName names the shared memory of members a and b: from their
// names, not their places in the list, for the reason role gives, and
// hashed, since a name may hold any character.
func (g *groupPlan) shmLinkName(a, b int) string {
	lo, hi := g.names[a], g.names[b]
	if hi < lo {
		lo, hi = hi, lo
	}
	sum := sha256.Sum256([]byte(lo + "\x00" + hi))
	return "rref-" + g.addrs[a].shmGroup + "-" + hex.EncodeToString(sum[:shmLinkHashBytes])
}

// shmLinkHashBytes of the pair's hash name its shared memory: 64 bits, so
// that the pairs of a group of thousands never collide by chance.
const shmLinkHashBytes = 8

// accepts counts the members that dial member me.
func (g *groupPlan) accepts(me int) int {
	n := 0
	for j := range g.names {
		if j != me && g.role(me, j) == roleAccept {
			n++
		}
	}
	return n
}

// shortID is the group's identity as errors and logs show it.
func (g *groupPlan) shortID() string { return hex.EncodeToString(g.identity[:4]) }

// helloFrame is member me's hello.
func (g *groupPlan) helloFrame(me int) []byte {
	return groupwire.AppendFrame(nil, &groupwire.Hello{Member: uint32(me), View: g.view, Identity: g.identity})
}

// GroupMismatchError says that two members were started with different
// groups. It matches ErrGroupMismatch.
type GroupMismatchError struct {
	Self, Peer         string // the member that found it, and the other (as Self names it)
	SelfView, PeerView string // each one's view: "name=transport ..." in member order
}

func (e *GroupMismatchError) Error() string {
	if e.SelfView == e.PeerView {
		return fmt.Sprintf("worker: %s and %s list the same members (%s) but prove different group identities: their secrets differ", e.Self, e.Peer, e.SelfView)
	}
	return fmt.Sprintf("worker: %s and %s were started with different groups: %s has [%s], %s has [%s]", e.Self, e.Peer, e.Self, e.SelfView, e.Peer, e.PeerView)
}

func (e *GroupMismatchError) Is(target error) bool { return target == ErrGroupMismatch }

// RefusedError is an accepting member's refusal of this member's link. It
// matches ErrNotAdmitted.
type RefusedError struct {
	By     string // the member that refused
	Reason groupwire.RefusalReason
	Detail string
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("worker: %s refused this member: %s", e.By, e.Detail)
}

func (e *RefusedError) Is(target error) bool { return target == ErrNotAdmitted }

// checkHello checks the hello of the member at the other end of a link of
// member me: the same group, and, when want >= 0, the member expected there.
func (g *groupPlan) checkHello(h *groupwire.Hello, me, want int) error {
	peer := "member #" + strconv.FormatUint(uint64(h.Member), 10)
	if int64(h.Member) < int64(len(g.names)) {
		peer = g.names[h.Member]
	}
	if want >= 0 {
		peer = g.names[want]
	}
	if h.View != g.view || !hmac.Equal(h.Identity, g.identity) {
		return &GroupMismatchError{Self: g.names[me], Peer: peer, SelfView: g.view, PeerView: h.View}
	}
	if int64(h.Member) >= int64(len(g.names)) {
		return fmt.Errorf("worker: a hello names member #%d of a group of %d", h.Member, len(g.names))
	}
	if want >= 0 && int(h.Member) != want {
		return fmt.Errorf("worker: the link to %s reached %s (two members' addresses lead to one process)", g.names[want], g.names[h.Member])
	}
	return nil
}

// readGroupFrame reads a link's first frame, within helloTimeout.
func readGroupFrame(ctx context.Context, conn *fifo.Conn) (groupwire.Message, error) {
	ctx, cancel := context.WithTimeout(ctx, helloTimeout)
	defer cancel()
	b, err := conn.Recv(ctx, nil)
	if err != nil {
		return nil, err
	}
	m, err := groupwire.Decode(b, nil)
	if err != nil {
		return nil, fmt.Errorf("worker: a malformed hello: %w", err)
	}
	return m, nil
}

// introduce is a dialer's side of a new tcp or fabric link of member me
// to member j: its hello, then j's, or j's refusal.
func (g *groupPlan) introduce(ctx context.Context, conn *fifo.Conn, me, j int) error {
	if err := conn.Send(ctx, g.helloFrame(me)); err != nil {
		return fmt.Errorf("worker: introduce %s to %s: %w", g.names[me], g.names[j], err)
	}
	m, err := readGroupFrame(ctx, conn)
	if err != nil {
		return fmt.Errorf("worker: %s's answer to %s's hello: %w", g.names[j], g.names[me], err)
	}
	switch m := m.(type) {
	case *groupwire.Hello:
		return g.checkHello(m, me, j)
	case *groupwire.Refusal:
		if m.Reason == groupwire.RefusalReasonViewsDiffer {
			return &GroupMismatchError{Self: g.names[me], Peer: g.names[j], SelfView: g.view, PeerView: m.View}
		}
		return &RefusedError{By: g.names[j], Reason: m.Reason, Detail: m.Detail}
	default:
		return fmt.Errorf("worker: %s answered %s's hello with a %v frame", g.names[j], g.names[me], m.MessageCode())
	}
}

// exchange is both ends' side of a new shared-memory link of member me to
// member j: each sends its hello, then checks the other's.
func (g *groupPlan) exchange(ctx context.Context, conn *fifo.Conn, me, j int) error {
	if err := conn.Send(ctx, g.helloFrame(me)); err != nil {
		return fmt.Errorf("worker: introduce %s to %s: %w", g.names[me], g.names[j], err)
	}
	m, err := readGroupFrame(ctx, conn)
	if err != nil {
		return fmt.Errorf("worker: %s's hello: %w", g.names[j], err)
	}
	h, ok := m.(*groupwire.Hello)
	if !ok {
		return fmt.Errorf("worker: %s opened its link with a %v frame where a hello belongs", g.names[j], m.MessageCode())
	}
	return g.checkHello(h, me, j)
}

// refusal is the frame refusing a dialer, with this member's view.
func (g *groupPlan) refusal(reason groupwire.RefusalReason, detail string) []byte {
	return groupwire.AppendFrame(nil, &groupwire.Refusal{Reason: reason, Detail: detail, View: g.view})
}

// admission is what an accepting member me makes of a dialer's first frame:
// the member it is, or why it is refused (an error matching
// ErrGroupMismatch when the two were started with different groups).
func (g *groupPlan) admission(m groupwire.Message, me int, connected func(int) bool) (id int, reason groupwire.RefusalReason, err error) {
	h, ok := m.(*groupwire.Hello)
	if !ok {
		return -1, groupwire.RefusalReasonMalformed, fmt.Errorf("worker: a %v frame where a hello belongs", m.MessageCode())
	}
	if err := g.checkHello(h, me, -1); err != nil {
		if errors.Is(err, ErrGroupMismatch) {
			return -1, groupwire.RefusalReasonViewsDiffer, err
		}
		return -1, groupwire.RefusalReasonMalformed, err
	}
	id = int(h.Member)
	switch {
	case g.role(id, me) != roleDial:
		return -1, groupwire.RefusalReasonWrongDirection, fmt.Errorf("worker: %s dialed %s, which dials it", g.names[id], g.names[me])
	case connected(id):
		return -1, groupwire.RefusalReasonMemberConnected, fmt.Errorf("worker: %s is already connected to %s (a second process named %s, or %s restarted before %s saw it fail)", g.names[id], g.names[me], g.names[id], g.names[id], g.names[me])
	}
	return id, 0, nil
}

// peerIsFailed says whether this worker has taken peer id for dead.
func (w *Worker) peerIsFailed(id core.WorkerID) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.dead[id]
}
