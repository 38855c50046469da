package worker

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rrefkit/rref/internal/netfault"
)

// A tcp link whose connection is reset is dialed again and resumes: calls,
// remotes and fetches in flight across the resets all complete, the RRefs
// either side holds stay valid, and the group shuts down clean. It used to
// make the peer dead for good (before resumption), and then, with
// resumption in the transport, still did: Start closed its listener, so
// nothing answered the re-dial.
func TestResetLinksResume(t *testing.T) {
	peers := peersFor("tcp")
	rl, err := netfault.NewRelay(peers[0].Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer rl.Close()
	viaRelay := []Peer{{"A", rl.Addr()}, peers[1]} // B dials A through the relay
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cfg := Config{Setup: groupSetup}
	var a *Worker
	var aErr error
	started := make(chan struct{})
	go func() {
		defer close(started)
		a, aErr = Start(ctx, "A", peers, secret, cfg)
	}()
	b, err := Start(ctx, "B", viaRelay, secret, cfg)
	<-started
	if err != nil || aErr != nil {
		t.Fatalf("start: %v, %v", aErr, err)
	}
	// Values each side holds across every reset.
	ra, err := Remote[int](ctx, b, "A", "add", [2]int{40, 2})
	if err != nil {
		t.Fatal(err)
	}
	rb, err := Call[*RRef[int]](ctx, a, "B", "make", 7)
	if err != nil {
		t.Fatal(err)
	}

	// Callers run until every reset is done, and at least calls times.
	const resets, callers, calls = 20, 4, 50
	var broken atomic.Int64
	var resetsDone atomic.Bool
	more := func(i int) bool { return i < calls || !resetsDone.Load() }
	stop := make(chan struct{})
	resetter := make(chan struct{})
	go func() {
		defer close(resetter)
		defer resetsDone.Store(true)
		for i := 0; i < resets; i++ {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			broken.Add(int64(rl.Reset()))
		}
	}()
	var wg sync.WaitGroup
	errs := make(chan error, 2*callers)
	for c := 0; c < callers; c++ {
		wg.Add(2)
		go func() { // B calls A and fetches A's value through B's handle
			defer wg.Done()
			for i := 0; more(i); i++ {
				if v, err := Call[int](ctx, b, "A", "add", [2]int{c, i}); err != nil || v != c+i {
					errs <- fmt.Errorf("B calls A: %d, %v", v, err)
					return
				}
				if v, err := ra.ToHere(ctx); err != nil || v != 42 {
					errs <- fmt.Errorf("B fetches from A: %d, %v", v, err)
					return
				}
			}
		}()
		go func() { // A passes B's value back to B and creates values there
			defer wg.Done()
			for i := 0; more(i); i++ {
				r, err := Remote[int](ctx, a, "B", "add", [2]int{i, c})
				if err != nil {
					errs <- err
					return
				}
				v, err := r.ToHere(ctx)
				r.Release()
				if err != nil || v != i+c {
					errs <- fmt.Errorf("A's remote on B: %d, %v", v, err)
					return
				}
				if v, err := rb.ToHere(ctx); err != nil || v != 7 {
					errs <- fmt.Errorf("A fetches from B: %d, %v", v, err)
					return
				}
			}
		}()
	}
	go func() { // a caller that failed stops the resets, so the others end
		wg.Wait()
		close(stop)
	}()
	wg.Wait()
	<-resetter
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if broken.Load() == 0 {
		t.Fatal("no connection was reset: the test tested nothing")
	}
	t.Logf("%d connections reset under traffic", broken.Load())
	ra.Release()
	rb.Release()
	if err := ShutdownGroup(ctx, []*Worker{a, b}); err != nil {
		t.Errorf("shutdown after the resets: %v", err)
	}
}
