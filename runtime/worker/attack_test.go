package worker

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/rrefkit/rref/fifo"
	"github.com/rrefkit/rref/generated/rref"
)

// hostileMember joins a group as its last member with raw connections
// (it knows the secret: a compromised member), so it can send any frame.
func hostileMember(t *testing.T, ctx context.Context, peers []Peer, transport string) []*fifo.Conn {
	t.Helper()
	me := len(peers) - 1
	plan, err := planGroup(peers, secret)
	if err != nil {
		t.Fatal(err)
	}
	conns := make([]*fifo.Conn, me)
	for j := 0; j < me; j++ {
		var c *fifo.Conn
		var err error
		if transport == "shm" {
			if plan.role(me, j) == roleCreate {
				c, err = fifo.ListenSHM(ctx, plan.shmLinkName(me, j), secret, fifo.Config{})
			} else {
				c, err = fifo.DialSHM(ctx, plan.shmLinkName(me, j), secret, fifo.Config{})
			}
			if err == nil {
				err = plan.exchange(ctx, c, me, j)
			}
		} else {
			c, err = dialRetry(ctx, peers[j].Addr, secret, fifo.Config{})
			if err == nil {
				err = plan.introduce(ctx, c, me, j)
			}
		}
		if err != nil {
			t.Fatalf("the hostile member's link to %s: %v", peers[j].Name, err)
		}
		if err := c.Send(ctx, readyFrame); err != nil {
			t.Fatal(err)
		}
		conns[j] = c
	}
	return conns
}

// TestHostileMemberReadsNothing plays a member of the group that knows the
// secret and guesses ids (counting up from 1, as ids used to be minted,
// and at random) in fetches, fork requests and deletes to real workers
// over tcp and shm: it must get no value, and nothing may be freed early.
func TestHostileMemberReadsNothing(t *testing.T) {
	for _, transport := range []string{"tcp", "shm"} {
		t.Run(transport, func(t *testing.T) {
			peers := groupPeers(transport, 3)
			peers[2].Name = "M"
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			ws := make([]*Worker, 2)
			errs := make(chan error, 2)
			for i := range ws {
				go func() {
					var err error
					ws[i], err = Start(ctx, peers[i].Name, peers, secret, Config{Logger: quiet, Setup: groupSetup})
					errs <- err
				}()
			}
			conns := hostileMember(t, ctx, peers, transport)
			for range ws {
				if err := <-errs; err != nil {
					t.Fatal(err)
				}
			}
			a, b := ws[0], ws[1]
			const secretValue = 424242
			private, _ := NewRRef(a, secretValue) // never shared
			shared, _ := NewRRef(a, 7)
			if v, err := Call[int](ctx, a, "B", "relay", relayArg{Ref: shared}); err != nil || v != 7 {
				t.Fatal(v, err)
			}
			remote, err := Remote[int](ctx, b, "A", "add", [2]int{secretValue, 0})
			if err != nil {
				t.Fatal(err)
			}
			if v, err := remote.ToHere(ctx); err != nil || v != secretValue {
				t.Fatal(v, err)
			}
			rng := rand.New(rand.NewPCG(1, 2))
			sent := 0
			for id := 0; id < 2000; id++ {
				local := uint64(id/2 + 1)
				if id%2 == 1 {
					local = rng.Uint64()
				}
				for owner := rref.WorkerID(1); owner <= 2; owner++ {
					rid := rref.RRefID{Worker: owner, Local: local}
					fork := rref.ForkID{Worker: 3, Local: local}
					for _, m := range []rref.Message{
						&rref.FetchCall{FetchID: uint64(id), RRef: rid, Fork: fork},
						&rref.ForkRequest{RRef: rid, Fork: fork, Parent: rref.ForkID{Worker: owner, Local: local}},
						&rref.UserDelete{RRef: rid, Fork: rref.ForkID{Worker: owner, Local: local}},
					} {
						if err := conns[owner-1].Send(ctx, rref.AppendFrame(nil, m)); err != nil {
							t.Fatal(err)
						}
						sent++
					}
				}
			}
			// Read what the owners answered until they are quiet.
			replies, values := 0, 0
			for _, c := range conns {
				for {
					rctx, rcancel := context.WithTimeout(ctx, 500*time.Millisecond)
					frame, err := c.Recv(rctx, nil)
					rcancel()
					if err != nil {
						break
					}
					m, err := rref.Decode(frame, nil)
					if err != nil {
						continue // barrier reports and ready frames
					}
					replies++
					if fr, ok := m.(*rref.FetchRet); ok && (fr.Error == rref.ErrorKindNone || len(fr.Value) > 0) {
						values++
						t.Errorf("a guessed fetch got a value: %+v", fr)
					}
				}
			}
			t.Logf("%d forged messages, %d answered, %d values leaked", sent, replies, values)
			if replies == 0 {
				t.Error("no forged request was answered: the test reached nothing")
			}
			// Nothing was freed early: every real reference still reads its value.
			if v, err := private.LocalValue(ctx); err != nil || v != secretValue {
				t.Errorf("the private value after the attack: %d, %v", v, err)
			}
			if v, err := remote.ToHere(ctx); err != nil || v != secretValue {
				t.Errorf("a remote value after the attack: %d, %v", v, err)
			}
			if v, err := Call[int](ctx, a, "B", "relay", relayArg{Ref: shared}); err != nil || v != 7 {
				t.Errorf("a shared value after the attack: %d, %v", v, err)
			}
			private.Release()
			shared.Release()
			remote.Release()
			for _, c := range conns {
				c.Close()
			}
			for _, w := range ws {
				w.Close()
			}
		})
	}
}
