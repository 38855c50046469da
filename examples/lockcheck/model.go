package main

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/rrefkit/rref/examples/lockcheck/lockpb"
	"github.com/rrefkit/rref/explore"
	"github.com/rrefkit/rref/genrt"
)

// Config is one exploration of the lock protocol.
type Config struct {
	Clients int // clients, named 1..Clients
	Rounds  int // how many times each client takes and gives back the lock
	Resends int // how many messages the network may deliver twice (a resend after a reconnect)
	// The seeded bugs, to show what the engine finds.
	Forgetful bool // the server does not recognise a resent Acquire
	Trusting  bool // the server frees the lock on any Release, whatever its token
}

type client struct {
	state   lockpb.ClientState
	request uint64 // the current request's number
	token   uint64 // the token held, while holding
	rounds  int    // acquisitions left
}

type waiter struct {
	client  lockpb.ClientID
	request uint64
}

type server struct {
	state  lockpb.ServerState
	holder lockpb.ClientID
	token  uint64   // the last token granted
	queue  []waiter // requests waiting for the lock, oldest first
	seen   []uint64 // index client-1: the highest request heard from it
}

// packet is a frame in flight, encoded by the generated codec: every
// delivery decodes it, as a real receiver would.
type packet struct {
	to    int // 0: the server; i: client i
	frame string
}

// System is the whole protocol in one state: the clients, the server, the
// network, and the monitors' facts. It is an explore.Model.
type System struct {
	cfg       *Config
	clients   []client
	srv       server
	net       []packet
	resends   int    // resends the network may still make
	accepted  uint64 // monitor: the largest token a client has accepted
	violation *explore.Violation
}

// Choices are numbered: closeChoice closes the server; 0..n-1 is client i+1's
// next action; then one per packet to deliver, then one per packet to resend.
const closeChoice = -1

// NewSystem is the start state of cfg.
func NewSystem(cfg *Config) *System {
	s := &System{cfg: cfg, clients: make([]client, cfg.Clients), resends: cfg.Resends}
	for i := range s.clients {
		s.clients[i].rounds = cfg.Rounds
	}
	s.srv.seen = make([]uint64, cfg.Clients)
	return s
}

// Choices implements explore.Model.
func (s *System) Choices() []int {
	var out []int
	n := len(s.clients)
	if s.srv.state == lockpb.ServerFree && s.allDone() {
		out = append(out, closeChoice)
	}
	for i, c := range s.clients {
		if c.state == lockpb.ClientIdle || c.state == lockpb.ClientHolding {
			out = append(out, i)
		}
	}
	for j := range s.net {
		out = append(out, n+j)
	}
	if s.resends > 0 {
		for j := range s.net {
			out = append(out, n+len(s.net)+j)
		}
	}
	return out
}

func (s *System) allDone() bool {
	for _, c := range s.clients {
		if c.state != lockpb.ClientDone {
			return false
		}
	}
	return true
}

// Describe implements explore.Model.
func (s *System) Describe(c int) string {
	n := len(s.clients)
	switch {
	case c == closeChoice:
		return "server closes"
	case c < n:
		cl := s.clients[c]
		switch {
		case cl.state == lockpb.ClientHolding:
			return fmt.Sprintf("client %d releases token %d", c+1, cl.token)
		case cl.rounds > 0:
			return fmt.Sprintf("client %d asks (request %d)", c+1, cl.request+1)
		default:
			return fmt.Sprintf("client %d finishes", c+1)
		}
	case c < n+len(s.net):
		return "deliver " + s.describePacket(s.net[c-n])
	default:
		return "resend " + s.describePacket(s.net[c-n-len(s.net)])
	}
}

func (s *System) describePacket(p packet) string {
	m, err := lockpb.Decode([]byte(p.frame), nil)
	to := "server"
	if p.to > 0 {
		to = "client " + strconv.Itoa(p.to)
	}
	if err != nil {
		return fmt.Sprintf("a bad frame to %s", to)
	}
	return fmt.Sprintf("%v%s to %s", m.MessageCode(), strings.TrimPrefix(fmt.Sprintf("%+v", m), "&"), to)
}

// ChoiceKey implements explore.Model.
func (s *System) ChoiceKey(c int) string {
	n := len(s.clients)
	switch {
	case c < n:
		return "act" + strconv.Itoa(c)
	case c < n+len(s.net):
		return "deliver" + s.net[c-n].frame
	default:
		return "resend" + s.net[c-n-len(s.net)].frame
	}
}

// Clone implements explore.Model.
func (s *System) Clone() *System {
	n := *s
	n.clients = slices.Clone(s.clients)
	n.srv.queue = slices.Clone(s.srv.queue)
	n.srv.seen = slices.Clone(s.srv.seen)
	n.net = slices.Clone(s.net)
	return &n
}

// Violation implements explore.Model.
func (s *System) Violation() *explore.Violation { return s.violation }

func (s *System) fail(inv, format string, args ...any) {
	if s.violation == nil {
		s.violation = &explore.Violation{Invariant: inv, Detail: fmt.Sprintf(format, args...)}
	}
}

// Step implements explore.Model.
func (s *System) Step(c int) {
	n := len(s.clients)
	switch {
	case c == closeChoice:
		s.srv.state = s.stepServer(s.srv.state, lockpb.ServerOnClose)
	case c < n:
		s.act(c)
	case c < n+len(s.net):
		p := s.net[c-n]
		s.net = slices.Delete(s.net, c-n, c-n+1)
		s.deliver(p)
	default:
		s.resends--
		s.net = append(s.net, s.net[c-n-len(s.net)])
	}
	s.monitor()
}

// act is client i's next action, by its own program.
func (s *System) act(i int) {
	c := &s.clients[i]
	id := lockpb.ClientID(i + 1)
	switch {
	case c.state == lockpb.ClientHolding:
		c.state = s.stepClient(c.state, lockpb.ClientOnGive)
		s.send(0, &lockpb.Release{Client: id, Token: c.token})
		c.token = 0
	case c.rounds > 0:
		c.state = s.stepClient(c.state, lockpb.ClientOnAsk)
		c.rounds--
		c.request++
		s.send(0, &lockpb.Acquire{Client: id, Request: c.request})
	default:
		c.state = s.stepClient(c.state, lockpb.ClientOnFinish)
	}
}

func (s *System) send(to int, m lockpb.Message) {
	s.net = append(s.net, packet{to: to, frame: string(lockpb.AppendFrame(nil, m))})
}

func (s *System) deliver(p packet) {
	m, err := lockpb.Decode([]byte(p.frame), nil)
	if err != nil {
		s.fail("codec", "a frame the sender encoded does not decode: %v", err)
		return
	}
	switch m := m.(type) {
	case *lockpb.Acquire:
		s.acquire(m)
	case *lockpb.Release:
		s.release(m)
	case *lockpb.Grant:
		c := &s.clients[p.to-1]
		if c.state != lockpb.ClientWaiting || m.Request != c.request {
			return // a resent or stale grant: this request was answered already
		}
		c.state = s.checked(lockpb.StepClientOnGranted(c.state, m))
		c.token = m.Token
		if m.Token <= s.accepted {
			s.fail(lockpb.InvariantFencing, "client %d accepted token %d after token %d", p.to, m.Token, s.accepted)
		}
		s.accepted = max(s.accepted, m.Token)
	}
}

func (s *System) acquire(m *lockpb.Acquire) {
	if !s.cfg.Forgetful {
		if m.Request <= s.srv.seen[m.Client-1] {
			return // a resend of a request already queued or granted
		}
		s.srv.seen[m.Client-1] = m.Request
	}
	s.srv.state = s.checkedServer(lockpb.StepServerOnLock(s.srv.state, m))
	if s.srv.holder != 0 {
		s.srv.queue = append(s.srv.queue, waiter{m.Client, m.Request})
		return
	}
	s.grant(waiter{m.Client, m.Request})
}

func (s *System) grant(w waiter) {
	s.srv.holder = w.client
	s.srv.token++
	s.send(int(w.client), &lockpb.Grant{Request: w.request, Token: s.srv.token})
}

func (s *System) release(m *lockpb.Release) {
	if s.srv.state != lockpb.ServerHeld {
		return // a resent release of a lock already free
	}
	if !s.cfg.Trusting && (m.Client != s.srv.holder || m.Token != s.srv.token) {
		return // a resent release of an earlier holding
	}
	s.srv.state = s.checkedServer(lockpb.StepServerOnUnlock(s.srv.state, m))
	s.srv.holder = 0
	if len(s.srv.queue) > 0 {
		next := s.srv.queue[0]
		s.srv.queue = slices.Delete(s.srv.queue, 0, 1)
		s.srv.state = s.stepServer(s.srv.state, lockpb.ServerOnLock)
		s.grant(next)
	}
}

// checked and checkedServer take a typed step's result (a message's own
// step: its type picks the event), reporting an undeclared transition.
func (s *System) checked(next lockpb.ClientState, _ genrt.Outcome, err error) lockpb.ClientState {
	if err != nil {
		s.fail("spec", "%v", err)
	}
	return next
}

func (s *System) checkedServer(next lockpb.ServerState, _ genrt.Outcome, err error) lockpb.ServerState {
	if err != nil {
		s.fail("spec", "%v", err)
	}
	return next
}

// stepClient and stepServer run the generated machines: a transition the
// spec does not declare is a violation, as in the P language.
func (s *System) stepClient(st lockpb.ClientState, e lockpb.ClientEvent) lockpb.ClientState {
	next, _, err := lockpb.StepClient(st, e)
	if err != nil {
		s.fail("spec", "%v", err)
	}
	return next
}

func (s *System) stepServer(st lockpb.ServerState, e lockpb.ServerEvent) lockpb.ServerState {
	next, _, err := lockpb.StepServer(st, e)
	if err != nil {
		s.fail("spec", "%v", err)
	}
	return next
}

// monitor checks the safety invariants after every step.
func (s *System) monitor() {
	var holders []string
	for i, c := range s.clients {
		if c.state == lockpb.ClientHolding {
			holders = append(holders, strconv.Itoa(i+1))
		}
	}
	if len(holders) > 1 {
		s.fail(lockpb.InvariantMutex, "clients %s hold the lock at once", strings.Join(holders, " and "))
	}
}

// CheckEnd implements explore.Model: a run that ends must leave no client
// in a hot state (waiting for a grant that never comes) and the server closed.
func (s *System) CheckEnd() {
	for i, c := range s.clients {
		if c.state.IsHot() || !c.state.IsFinal() {
			s.fail(lockpb.InvariantProgress, "the run ended with client %d %s (request %d)", i+1, c.state, c.request)
			return
		}
	}
	if !s.srv.state.IsFinal() {
		s.fail(lockpb.InvariantProgress, "the run ended with the server %s, held by client %d", s.srv.state, s.srv.holder)
	}
}

// AppendState implements explore.Model. The order of the frames in flight
// does not matter (any may arrive next), so they are sorted.
func (s *System) AppendState(b []byte) []byte { return s.appendState(b, nil) }

// appendState encodes the state with its clients renamed by p (nil: as
// they are), for AppendState and AppendPermuted (symmetry.go).
func (s *System) appendState(b []byte, p *explore.Permutation) []byte {
	for j := range s.clients {
		c := s.clients[original(p, j)]
		b = append(b, byte(c.state), byte(c.rounds))
		b = appendUint(b, c.request)
		b = appendUint(b, c.token)
	}
	b = append(b, byte(s.srv.state))
	b = appendUint(b, uint64(rename(p, s.srv.holder)))
	b = appendUint(b, s.srv.token)
	b = appendUint(b, uint64(len(s.srv.queue)))
	for _, w := range s.srv.queue {
		b = appendUint(b, uint64(rename(p, w.client)))
		b = appendUint(b, w.request)
	}
	for j := range s.srv.seen {
		b = appendUint(b, s.srv.seen[original(p, j)])
	}
	frames := make([]string, len(s.net))
	for i, pk := range s.net {
		frames[i] = strconv.Itoa(int(rename(p, lockpb.ClientID(pk.to)))) + ">" + renameFrame(p, pk.frame)
	}
	slices.Sort(frames)
	b = appendUint(b, uint64(len(frames)))
	for _, f := range frames {
		b = appendUint(b, uint64(len(f)))
		b = append(b, f...)
	}
	b = appendUint(b, uint64(s.resends))
	return appendUint(b, s.accepted)
}

func appendUint(b []byte, v uint64) []byte {
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}
