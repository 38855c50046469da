package fifo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// strayFlood holds n connections to addr from source (an address of this
// host), silent or sending a byte a second, each redialled the moment the
// listener drops it, until stop.
type strayFlood struct {
	wg      sync.WaitGroup
	stop    chan struct{}
	dialed  atomic.Int64
	dropped atomic.Int64
}

func startFlood(t *testing.T, addr, source string, n int) *strayFlood {
	f := &strayFlood{stop: make(chan struct{})}
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(source)}, Timeout: time.Second}
	for i := range n {
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			slow := i%2 == 1
			for {
				select {
				case <-f.stop:
					return
				default:
				}
				nc, err := d.Dial("tcp", addr)
				if err != nil {
					select {
					case <-f.stop:
						return
					case <-time.After(10 * time.Millisecond): // out of ports or descriptors for a moment
					}
					continue
				}
				f.dialed.Add(1)
				f.hold(nc, slow)
				f.dropped.Add(1)
			}
		}()
	}
	t.Cleanup(f.end)
	return f
}

// hold keeps nc until the listener drops it or the flood stops.
func (f *strayFlood) hold(nc net.Conn, slow bool) {
	defer nc.Close()
	gone := make(chan struct{})
	go func() {
		io.Copy(io.Discard, nc) // ends when the listener closes it
		close(gone)
	}()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-gone:
			return
		case <-f.stop:
			// Closed first, a connection would wait out TIME_WAIT (60 s)
			// on its port, and a few rounds of thousands (-count) use up
			// the source address's ports: its binds slow to a crawl and
			// then fail, and the next round's flood never fills the pool.
			// A reset leaves nothing behind.
			if tc, ok := nc.(*net.TCPConn); ok {
				tc.SetLinger(0)
			}
			return
		case <-tick.C:
			if slow {
				nc.Write([]byte{0x42})
			}
		}
	}
}

func (f *strayFlood) end() {
	select {
	case <-f.stop:
	default:
		close(f.stop)
	}
	f.wg.Wait()
}

// sameSourceMargin: strays beyond the pool's size from the member's own
// address, so that every slot is pushed out again and again. Few enough
// that the kernel's accept queue stays short: there wait all the strays
// the pool does not hold, and with thousands more the pool would turn
// over only as fast as the queue let them in.
const sameSourceMargin = 476

// anotherAddress is an address of this host other than a member's
// (127.0.0.1), drawn for each test process from 127.0.0.0/8, which is all
// loopback on Linux. A flood binds a port of its address for every
// connection it holds, and past half of an address's 28k ports each bind
// takes milliseconds: three copies of the test at once flooding from one
// fixed address slowed one another's binds so much that their floods
// never filled the pool.
var anotherAddress = fmt.Sprintf("127.%d.%d.%d", 1+rand.IntN(254), rand.IntN(256), 1+rand.IntN(254))

// TestStrayFloodCannotStopAResume: an outsider holding thousands of idle
// or byte-a-second connections to a listener, redialling each the moment
// it drops, from another host or from the member's own, must not keep a
// member's broken link from resuming. With one pool of slots that refused
// newcomers once full, 1024 such connections made every re-dial fail, and
// the link was declared dead; later, from the member's own address, while
// the listener never counted the hellos it read, re-dials were pushed out
// like strays while they waited for their proofs, most runs.
func TestStrayFloodCannotStopAResume(t *testing.T) {
	strays := 5000
	if raceEnabled || testing.Short() {
		strays = 1500 // the race detector allows 8128 goroutines; each stray takes two
	}
	for _, c := range []struct{ name, source string }{{"another_address", anotherAddress}, {"same_address", "127.0.0.1"}} {
		source := c.source
		t.Run(c.name, func(t *testing.T) {
			strays := strays
			if source == "127.0.0.1" {
				// From the member's own address, its handshake is told from
				// the strays' only by its hello, which must arrive before a
				// pool's worth of newer strays does. Just past the pool, so
				// every slot turns over as fast as the strays can redial.
				strays = min(strays, maxPendingHandshakes+sameSourceMargin)
			}
			cfg := Config{DeadAfter: 10 * time.Second}
			a, b, r, l := relayedPair(t, cfg)
			defer a.Close()
			defer b.Close()
			f := startFlood(t, l.Addr().String(), source, strays)
			// The pool is full once a thousand strays have been pushed out.
			waitFor(t, eventually, "the flood filling the pool", func() bool { return f.dropped.Load() >= maxPendingHandshakes })
			r.Reset()
			start := time.Now()
			ctx, cancel := context.WithTimeout(context.Background(), cfg.DeadAfter)
			defer cancel()
			got := make(chan error, 1)
			go func() {
				p, err := b.Recv(ctx, nil)
				if err == nil && string(p) != "after the reset" {
					err = errors.New("got " + string(p))
				}
				got <- err
			}()
			if err := a.Send(ctx, []byte("after the reset")); err != nil {
				t.Fatalf("send after the reset: %v", err)
			}
			if err := <-got; err != nil {
				t.Fatalf("the link under the flood: %v (resumes %d and %d)", err, a.Resumes(), b.Resumes())
			}
			took := time.Since(start)
			if a.Resumes()+b.Resumes() == 0 {
				t.Fatal("nothing resumed: the reset reached nothing")
			}
			echoCheck(t, a, b)
			t.Logf("resumed in %v beside %d strays from %s (%d dialled, %d dropped, %d refused)", took, strays, source, f.dialed.Load(), f.dropped.Load(), l.Refused())
		})
	}
}

// addrConn is a connection that only has a remote address.
type addrConn struct {
	net.Conn
	remote net.Addr
}

func (c addrConn) RemoteAddr() net.Addr { return c.remote }

func connFrom(host string, port int) net.Conn {
	return addrConn{remote: &net.TCPAddr{IP: net.ParseIP(host), Port: port}}
}

// TestAdmissionEvictsTheBusiestSource: with every slot taken, a newcomer
// pushes out the oldest handshake of the source holding the most slots,
// never another source's; a handshake that ended leaves its slot, and one
// pushed out is told so when it ends.
func TestAdmissionEvictsTheBusiestSource(t *testing.T) {
	ad := newAdmission(4, func(net.Conn) int { return 0 })
	member, _ := ad.take(connFrom("10.0.0.1", 1))
	var strays []*slot
	for i := range 3 {
		s, evicted := ad.take(connFrom("10.0.0.9", 100+i))
		if evicted != nil {
			t.Fatalf("the pool evicted %v before it was full", evicted.RemoteAddr())
		}
		strays = append(strays, s)
	}
	for i := range 10 {
		s, evicted := ad.take(connFrom("10.0.0.9", 200+i))
		if evicted == nil {
			t.Fatal("a full pool took a newcomer without a slot")
		}
		if evicted.RemoteAddr().String() == member.nc.RemoteAddr().String() {
			t.Fatalf("newcomer %d pushed out the member", i)
		}
		if i < len(strays) && evicted != strays[i].nc {
			t.Fatalf("newcomer %d pushed out %v, not the oldest stray %v", i, evicted.RemoteAddr(), strays[i].nc.RemoteAddr())
		}
		strays = append(strays, s)
	}
	if ad.n != 4 {
		t.Fatalf("%d slots held, want 4", ad.n)
	}
	if ad.leave(strays[0]) {
		t.Fatal("an evicted handshake left the pool as if it held a slot")
	}
	if !ad.leave(member) {
		t.Fatal("the member's handshake lost its slot")
	}
	// The same source as the member: the oldest goes first.
	s, evicted := ad.take(connFrom("10.0.0.1", 2))
	if evicted != nil {
		t.Fatalf("a slot was free, yet %v was pushed out", evicted.RemoteAddr())
	}
	_, evicted = ad.take(connFrom("10.0.0.9", 300))
	if evicted == s.nc {
		t.Fatal("a stray pushed out the only handshake of another source")
	}
	if ad.n != 4 || len(ad.bySource) != 2 {
		t.Fatalf("%d slots over %d sources; want 4 over 2", ad.n, len(ad.bySource))
	}
}

// TestAdmissionKeepsHandshakesThatSentAHello: from one source, a
// handshake whose peer sent a well-formed hello is pushed out only once
// no silent one is left, however old it is; then the one heard longest ago
// goes first.
func TestAdmissionKeepsHandshakesThatSentAHello(t *testing.T) {
	ad := newAdmission(3, func(net.Conn) int { return 0 })
	member, _ := ad.take(connFrom("127.0.0.1", 1))
	ad.progressed(member)
	for i := range 2 {
		ad.take(connFrom("127.0.0.1", 100+i))
	}
	for i := range 20 {
		if _, evicted := ad.take(connFrom("127.0.0.1", 200+i)); evicted == member.nc {
			t.Fatalf("newcomer %d pushed out the handshake that sent a hello, with silent ones in the pool", i)
		}
	}
	// Every other slot says hello too: the member, heard first, goes.
	for _, src := range ad.bySource {
		for e := src.silent.Front(); e != nil; {
			next := e.Next()
			ad.progressed(e.Value.(*slot))
			e = next
		}
	}
	if _, evicted := ad.take(connFrom("127.0.0.1", 300)); evicted != member.nc {
		t.Fatalf("with hellos everywhere, %v was pushed out, not the one heard first", evicted)
	}
}

// TestAdmissionKeepsHandshakesWhoseHelloWaits: a handshake whose hello
// has arrived but was not read yet (its goroutine has not run: a busy
// process) counts as one that sent it. The accept loop, about to push it
// out as the oldest silent one, finds the hello waiting in its socket and
// pushes out the next silent one instead; it looks at each slot once.
func TestAdmissionKeepsHandshakesWhoseHelloWaits(t *testing.T) {
	var looked []net.Conn
	var member net.Conn
	ad := newAdmission(4, func(nc net.Conn) int {
		looked = append(looked, nc)
		if nc == member {
			return helloSize
		}
		return 1 // a byte-a-second stray's byte
	})
	m, _ := ad.take(connFrom("127.0.0.1", 1))
	member = m.nc
	var strays []net.Conn
	for i := range 3 {
		s, _ := ad.take(connFrom("127.0.0.1", 100+i))
		strays = append(strays, s.nc)
	}
	for i := range 3 {
		_, evicted := ad.take(connFrom("127.0.0.1", 200+i))
		if evicted == member {
			t.Fatalf("newcomer %d pushed out the handshake whose hello waited unread", i)
		}
		if evicted != strays[i] {
			t.Fatalf("newcomer %d pushed out %v, not the oldest silent stray %v", i, evicted.RemoteAddr(), strays[i].RemoteAddr())
		}
	}
	if !m.hello {
		t.Fatal("the handshake whose hello waited is not counted as heard")
	}
	if n := len(looked); n != 4 {
		t.Fatalf("%d looks at sockets for 3 newcomers; want 4 (the member's once, then one each)", n)
	}
	if !ad.leave(m) {
		t.Fatal("the member's handshake lost its slot")
	}
}

// heldProof is a member's connection that sends its hello at once and
// holds its proof back until release is closed; proving says its proof
// is ready (the listener's hello and proof arrived).
type heldProof struct {
	net.Conn
	writes  int
	proving chan struct{}
	release chan struct{}
}

func (c *heldProof) Write(p []byte) (int, error) {
	if c.writes++; c.writes == 2 {
		close(c.proving)
		<-c.release
	}
	return c.Conn.Write(p)
}

// TestTCPListenerKeepsAHandshakeThatSentAHello: through a real listener,
// a member's handshake whose hello the listener read, and which waits for
// the member's proof, is not pushed out by any number of silent
// connections from the member's own address. (The listener once marked
// only a dialer's handshakes as having heard a hello, never its own, so
// the member went out like a stray once the pool had turned over.)
func TestTCPListenerKeepsAHandshakeThatSentAHello(t *testing.T) {
	var r refusals
	const bound = 4
	l := listen(t, Config{}, WithRefused(r.hook), withMaxPending(bound))
	defer l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), eventually)
	defer cancel()
	addr := l.Addr().String()
	raw, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	member := &heldProof{Conn: raw, proving: make(chan struct{}), release: make(chan struct{})}
	accepted := make(chan *Conn, 1)
	go func() {
		c, _ := l.Accept(ctx)
		accepted <- c
	}()
	dialed := make(chan error, 1)
	var res *resumer
	var nc net.Conn
	go func() {
		var err error
		nc, res, err = dialHandshake(ctx, member, addr, secret, mustDefaults(Config{}), tcpOptionsOf(nil), sessionID{})
		dialed <- err
	}()
	select {
	case <-member.proving:
	case err := <-dialed:
		t.Fatalf("the member's handshake ended before its proof: %v", err)
	}
	var silent []net.Conn
	defer func() {
		for _, s := range silent {
			s.Close()
		}
	}()
	busy := func() int {
		n := 0
		for _, err := range r.all() {
			if errors.Is(err, ErrBusy) {
				n++
			}
		}
		return n
	}
	// Four times the pool, each pushing one out once it is full.
	for range 4 * bound {
		s, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		silent = append(silent, s)
	}
	waitFor(t, eventually, "the silent connections turning the pool over", func() bool { return busy() >= 4*bound-bound })
	close(member.release)
	if err := <-dialed; err != nil {
		t.Fatalf("the member's handshake beside %d silent connections, %d of them pushed out: %v", len(silent), busy(), err)
	}
	c := <-accepted
	if c == nil {
		t.Fatal("no Accept of the member")
	}
	defer c.Close()
	m := newTCPConn(nc, raw, mustDefaults(Config{}), res)
	defer m.Close()
	echoCheck(t, m, c)
}
