package fifo

import (
	"bytes"
	"context"
	"encoding/binary"
	"os"
	"runtime"
	"sync"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// TestPollBesideRecv has pollers read a connection while a blocking
// receiver waits on it, with the sender pausing at random so the receiver
// parks and the pollers come and go: every message is received exactly
// once, and none waits for a wake-up that never comes (provider mem parks
// with no timeout, so a lost wake-up hangs the test).
func TestPollBesideRecv(t *testing.T) {
	for _, name := range []string{"mem", "shm", "tcp"} {
		pair := builtinPairs[name]
		t.Run(name, func(t *testing.T) {
			rapid.Check(t, func(rt *rapid.T) {
				n := rapid.IntRange(1, 300).Draw(rt, "messages")
				pollers := rapid.IntRange(1, 3).Draw(rt, "pollers")
				pauses := rapid.SliceOfN(rapid.IntRange(0, 400), n, n).Draw(rt, "pauses_us")
				// Pollers stop after a while: the blocking receiver, parked
				// while they polled, must then be woken for the rest.
				polls := rapid.SliceOfN(rapid.IntRange(0, 200), pollers, pollers).Draw(rt, "polls")
				a, b := pair(t, Config{Cells: 64, Spin: rapid.SampledFrom([]int{1, 50, 4000}).Draw(rt, "spin")})
				defer a.Close()
				defer b.Close()
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()

				var mu sync.Mutex
				seen := make([]int, n)
				total := 0
				done := make(chan struct{})
				record := func(p []byte) error {
					mu.Lock()
					defer mu.Unlock()
					if len(p) != 8 || binary.LittleEndian.Uint64(p) >= uint64(n) {
						rt.Errorf("bad message %x", p)
						return nil
					}
					seen[binary.LittleEndian.Uint64(p)]++
					if total++; total == n {
						close(done)
					}
					return nil
				}
				var wg sync.WaitGroup
				wg.Add(1 + pollers)
				go func() {
					defer wg.Done()
					for {
						if err := b.RecvFunc(ctx, record); err != nil {
							return
						}
					}
				}()
				for p := range pollers {
					go func() {
						defer wg.Done()
						for range polls[p] {
							select {
							case <-done:
								return
							default:
							}
							if _, err := b.Poll(record); err != nil {
								return
							}
							time.Sleep(50 * time.Microsecond)
						}
					}()
				}
				for i := range n {
					if pauses[i] > 300 {
						time.Sleep(time.Duration(pauses[i]-300) * 10 * time.Microsecond)
					}
					if err := a.Send(ctx, binary.LittleEndian.AppendUint64(nil, uint64(i))); err != nil {
						rt.Fatal(err)
					}
				}
				select {
				case <-done:
				case <-ctx.Done():
					mu.Lock()
					rt.Errorf("only %d of %d messages received", total, n)
					mu.Unlock()
				}
				b.Close()
				wg.Wait()
				for i, k := range seen {
					if k != 1 {
						rt.Fatalf("message %d received %d times", i, k)
					}
				}
			})
		})
	}
}

// TestCloseDuringPoll closes connections while goroutines poll and wait on
// them, at varied moments: every Poll and Recv returns, and none touches
// the ring after Close unmapped it (Close waits for them).
func TestCloseDuringPoll(t *testing.T) {
	for _, name := range []string{"mem", "shm"} {
		t.Run(name, func(t *testing.T) {
			for i := range 100 {
				a, b := builtinPairs[name](t, Config{Cells: 16})
				var wg sync.WaitGroup
				wg.Add(2)
				go func() {
					defer wg.Done()
					for {
						if _, err := b.Poll(func([]byte) error { return nil }); err != nil {
							return
						}
					}
				}()
				go func() {
					defer wg.Done()
					b.RecvFunc(context.Background(), func([]byte) error { return nil })
				}()
				time.Sleep(time.Duration(i%10) * 20 * time.Microsecond)
				closed := make(chan struct{})
				go func() { b.Close(); a.Close(); wg.Wait(); close(closed) }()
				select {
				case <-closed:
				case <-time.After(10 * time.Second):
					t.Fatalf("round %d: Close and the waiters did not return", i)
				}
			}
		})
	}
}

// TestExclusiveCloseUnderTraffic closes an exclusive shm end while its own
// receiver and sender are mid-stream: their calls take no lock Close could
// wait for, so the ring must stay mapped until the Conn is unreachable.
// Every call returns, none faults, and the mapping goes once the Conn does.
func TestExclusiveCloseUnderTraffic(t *testing.T) {
	maps := func() int {
		b, err := os.ReadFile("/proc/self/maps")
		if err != nil {
			t.Skip("no /proc/self/maps:", err)
		}
		return bytes.Count(b, []byte("rref-test-"))
	}
	before := maps()
	for i := range 50 {
		a, b := shmPair(t, Config{Cells: 16, Exclusive: true})
		var wg sync.WaitGroup
		wg.Add(3)
		go func() { // b's one receiver
			defer wg.Done()
			for {
				if err := b.RecvFunc(context.Background(), func([]byte) error { return nil }); err != nil {
					return
				}
			}
		}()
		go func() { // b's one sender
			defer wg.Done()
			for b.Send(context.Background(), pattern(i, 40)) == nil {
			}
		}()
		go func() { // the peer keeps b's receiver busy and drains b's sends
			defer wg.Done()
			go func() {
				for {
					if _, err := a.Recv(context.Background(), nil); err != nil {
						return
					}
				}
			}()
			for a.Send(context.Background(), pattern(i, 100)) == nil {
			}
		}()
		time.Sleep(time.Duration(i%10) * 50 * time.Microsecond)
		b.Close()
		a.Close()
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("round %d: calls did not return after Close", i)
		}
	}
	// The Conns are unreachable now: their cleanups unmap the rings.
	deadline := time.Now().Add(10 * time.Second)
	for maps() > before && time.Now().Before(deadline) {
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	if n := maps(); n > before {
		t.Fatalf("%d rings still mapped after their Conns became unreachable", n-before)
	}
}

// TestParksAndWakeUpsAreCounted has a receiver wait longer than its spin
// budget: it parks, and the sender's next message wakes it with a call,
// which both ends' Stats report. (A parked shm receiver looks again every
// few milliseconds, and a message sent just then needs no wake-up: the
// test tries a few times.)
func TestParksAndWakeUpsAreCounted(t *testing.T) {
	for _, name := range []string{"mem", "shm"} {
		t.Run(name, func(t *testing.T) {
			a, b := builtinPairs[name](t, Config{Cells: 16, Spin: 16})
			defer a.Close()
			defer b.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			for try := 0; try < 10 && a.Stats().WakeUps == 0; try++ {
				parks := b.Stats().Parks
				got := make(chan error, 1)
				go func() {
					_, err := b.Recv(ctx, nil)
					got <- err
				}()
				for b.Stats().Parks == parks && ctx.Err() == nil {
					time.Sleep(time.Millisecond)
				}
				if err := a.Send(ctx, []byte("wake up")); err != nil {
					t.Fatal(err)
				}
				if err := <-got; err != nil {
					t.Fatal(err)
				}
			}
			if a.Stats().WakeUps == 0 || b.Stats().Parks == 0 {
				t.Fatalf("sender %+v, receiver %+v: a park and a wake-up should be counted", a.Stats(), b.Stats())
			}
		})
	}
}
