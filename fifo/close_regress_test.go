package fifo

import (
	"context"
	"sync"
	"testing"
	"time"
)

// TestSharedCloseUnderSenders closes a shared shm end while several of its
// goroutines send through it: TrySend, an immediate Send and a rendezvous
// Send. Close unmaps the ring and the bulk slots once it holds the tx lock
// and inUse, so no sender may read either before taking one of them.
// (TrySend checked the peer's closed word before its lock, and the
// rendezvous copied into a slot outside both: a SIGSEGV under -race, seen
// in the worker's tests as a peer closed under polling callers.)
func TestSharedCloseUnderSenders(t *testing.T) {
	for i := range 40 {
		a, b := shmPair(t, Config{Cells: 16, EagerLimit: 64})
		go func() {
			for {
				if err := a.RecvFunc(context.Background(), func([]byte) error { return nil }); err != nil {
					return
				}
			}
		}()
		var wg sync.WaitGroup
		big := pattern(i, 4096) // past EagerLimit: a rendezvous
		for _, send := range []func() error{
			func() error { _, err := b.TrySend(pattern(i, 40)); return err },
			func() error { return b.Send(context.Background(), pattern(i, 8)) },
			func() error { return b.Send(context.Background(), big) },
		} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for send() == nil {
				}
			}()
		}
		time.Sleep(time.Duration(i%8) * 100 * time.Microsecond)
		b.Close()
		wg.Wait()
		a.Close()
	}
}
