package fifo

import (
	"context"
	"encoding/binary"
	"errors"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestCloseNeverWritesAfterACutFrame: a resumable end closes while several
// goroutines send and the peer stalls a little longer than closeWait.
// Close's deadline cuts the writer stuck on the full window partway
// through its batch, and then Close's own first try. A first version let
// both failures pass to the reader (whose socket was healthy) and wrote
// the close frame on the same connection right after the cut: when the cut
// fell on a frame boundary the peer saw a clean close while messages whose
// Send returned nil never left (2-8 rounds in 40; found by a review). A
// write cut by a deadline now ends its connection. The peer may see a
// break; it must never see a clean close that lost messages.
func TestCloseNeverWritesAfterACutFrame(t *testing.T) {
	tcpOnly(t)
	const senders = 4
	rounds := longOr(12, 40)
	var lostClean, clean, dead int
	for round := range rounds {
		cfg := Config{Cells: 1 << 18, EagerLimit: 64 << 10, DeadAfter: 300 * time.Millisecond}
		a, b := tcpResumablePair(t, cfg)
		if round%2 == 1 {
			a, b = b, a
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		go func() { // a receive loop on the closing end; b sends nothing
			for {
				if _, err := a.Recv(ctx, nil); err != nil {
					return
				}
			}
		}()
		var nilSends [senders]uint64
		var wg sync.WaitGroup
		for g := range senders {
			wg.Add(1)
			go func() {
				defer wg.Done()
				msg := make([]byte, 12+round%23)
				binary.LittleEndian.PutUint32(msg, uint32(g))
				for i := uint64(0); ; i++ {
					binary.LittleEndian.PutUint64(msg[4:], i)
					if a.Send(ctx, msg) != nil {
						return
					}
					nilSends[g] = i + 1
				}
			}()
		}
		stall := make(chan struct{})
		type result struct {
			got [senders]uint64
			err error
		}
		res := make(chan result, 1)
		go func() {
			var r result
			for n := 0; ; n++ {
				if n == 300 {
					<-stall
				}
				p, err := b.Recv(ctx, nil)
				if err != nil {
					r.err = err
					res <- r
					return
				}
				g, i := binary.LittleEndian.Uint32(p), binary.LittleEndian.Uint64(p[4:])
				if g >= senders || i != r.got[g] {
					r.err = errors.New("out of order")
					res <- r
					return
				}
				r.got[g]++
			}
		}()
		time.Sleep(150 * time.Millisecond) // b stopped at 300: a's window fills
		closed := make(chan struct{})
		go func() { a.Close(); close(closed) }()
		time.Sleep(time.Duration(110+(round%5)*15) * time.Millisecond) // past closeWait
		close(stall)
		<-closed
		wg.Wait()
		r := <-res
		lost := false
		for g := range senders {
			lost = lost || r.got[g] < nilSends[g]
		}
		switch {
		case errors.Is(r.err, ErrClosed) && lost:
			lostClean++
			t.Logf("round %d: the peer saw a clean close; Sends that returned nil %v, received %v", round, nilSends, r.got)
		case errors.Is(r.err, ErrClosed):
			clean++
		case errors.Is(r.err, ErrPeerDead):
			dead++
		default:
			t.Logf("round %d: %v", round, r.err)
		}
		cancel()
		b.Close()
	}
	t.Logf("%d rounds: clean %d, peer dead %d, clean close with Sends lost %d", rounds, clean, dead, lostClean)
	if lostClean > 0 {
		t.Errorf("in %d of %d rounds the peer saw a clean close but missed messages whose Send returned nil", lostClean, rounds)
	}
}

// TestCloseWhileThePeerStalls: the receiver stalls for 300 ms (longer than
// closeWait) just as the sender closes. Close cannot wait for it: what is
// unsent when it gives up is dropped by the reset its close sends, close
// frame included. Before, Close reported nothing of this and the peer
// could not tell; now the peer sees a break (ErrPeerDead) whenever it
// missed anything, and a clean close only with every message whose Send
// returned nil. Either way it ends within its DeadAfter.
func TestCloseWhileThePeerStalls(t *testing.T) {
	tcpOnly(t)
	for _, tc := range tcpKinds {
		t.Run(tc.name, func(t *testing.T) {
			for round := range longOr(4, 10) {
				a, b := tc.pair(t, Config{DeadAfter: time.Second, Cells: 1 << 18, EagerLimit: 1 << 20})
				if round%2 == 1 {
					a, b = b, a
				}
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				var sent atomic.Int64
				stopped := make(chan struct{})
				go func() {
					defer close(stopped)
					msg := make([]byte, 64<<10)
					for a.Send(ctx, msg) == nil {
						sent.Add(1)
					}
				}()
				type end struct {
					got int64
					err error
				}
				ended := make(chan end, 1)
				go func() {
					var got int64
					for {
						if got == 200 {
							time.Sleep(300 * time.Millisecond)
						}
						if _, err := b.Recv(ctx, nil); err != nil {
							ended <- end{got, err}
							return
						}
						got++
					}
				}()
				waitFor(t, 5*time.Second, "sends", func() bool { return sent.Load() > 200 })
				time.Sleep(20 * time.Millisecond)
				a.Close()
				<-stopped
				select {
				case e := <-ended:
					n := sent.Load()
					switch {
					case errors.Is(e.err, ErrClosed) && e.got != n && e.got != n+1:
						t.Errorf("round %d: a clean close, but %d sends returned nil and the peer received %d", round, n, e.got)
					case !errors.Is(e.err, ErrClosed) && !errors.Is(e.err, ErrPeerDead):
						t.Errorf("round %d: the peer ended with %v", round, e.err)
					}
				case <-time.After(5 * time.Second):
					t.Errorf("round %d: 5 s after the close the peer still waits", round)
				}
				cancel()
				b.Close()
			}
		})
	}
}

// TestSendWaitingForCreditsWhenThePeerCloses: a Send waiting for credits
// when the peer closes must fail. The wait also ends on the peer's close,
// and Send then put the message (beyond the credits) and returned nil for
// a message the closed peer could never take (9-19 rounds in 20).
func TestSendWaitingForCreditsWhenThePeerCloses(t *testing.T) {
	tcpOnly(t)
	for _, tc := range tcpKinds {
		t.Run(tc.name, func(t *testing.T) {
			bad := 0
			const rounds = 20
			for range rounds {
				a, b := tc.pair(t, Config{Cells: 16})
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				msg := make([]byte, 100)
				for { // fill the ring: b never receives
					ok, err := a.TrySend(msg)
					if err != nil {
						t.Fatal(err)
					}
					if !ok {
						break
					}
				}
				errc := make(chan error, 1)
				go func() { errc <- a.Send(ctx, msg) }() // waits for credits
				time.Sleep(10 * time.Millisecond)
				b.Close()
				if err := <-errc; err == nil {
					bad++
				}
				a.Close()
				cancel()
			}
			if bad > 0 {
				t.Errorf("%d of %d Sends waiting for credits returned nil after the peer closed", bad, rounds)
			}
		})
	}
}

// longOr is short rounds in the default run and long ones with RREF_LONG
// set, for tests whose failures are rare per round.
func longOr(short, long int) int {
	if os.Getenv("RREF_LONG") != "" {
		return long
	}
	return short
}

// tcpOnly skips a test of the tcp provider alone in a run for the fabric
// (RREF_FABRIC_ONLY), which repeats the package for one more provider.
func tcpOnly(t *testing.T) {
	if os.Getenv("RREF_FABRIC_ONLY") != "" {
		t.Skip("a tcp test; this run is for the fabric")
	}
}

// tcpKinds are the two kinds of tcp connection: AcceptTCP's, which a
// break ends, and a TCPListener's, which resume.
var tcpKinds = []struct {
	name string
	pair pairFunc
}{{"plain", tcpPair}, {"resumable", tcpResumablePair}}
