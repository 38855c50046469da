package fifo

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"
	"unsafe"
)

// slotMemory returns the memory of a link's rendezvous slots where the
// sender writes them in place (SendFunc), nil elsewhere; the fabric's
// tests add theirs.
var slotMemory = func(l link) []byte {
	if ml, ok := l.(*memLink); ok {
		return ml.txb.data
	}
	return nil
}

func within(p, mem []byte) bool {
	if len(p) == 0 || len(mem) == 0 {
		return false
	}
	a, lo := uintptr(unsafe.Pointer(&p[0])), uintptr(unsafe.Pointer(&mem[0]))
	return a >= lo && a+uintptr(len(p)) <= lo+uintptr(len(mem))
}

// TestSendFuncDeliversWhatFillWrites: every size, eager and rendezvous,
// arrives as fill wrote it; above the eager limit, on links with slots,
// fill writes the slot itself.
func TestSendFuncDeliversWhatFillWrites(t *testing.T) {
	for name, pair := range modes() {
		t.Run(name, func(t *testing.T) {
			a, b := pair(t, Config{Cells: 64, MaxMessage: 1 << 16})
			defer a.Close()
			defer b.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			sizes := []int{0, 1, 56, 57, 900, 1000, 1001, 5000, 1 << 16, 3}
			inSlot := make(chan bool, len(sizes))
			go func() {
				for i, n := range sizes {
					err := a.SendFunc(ctx, n, func(p []byte) error {
						if len(p) != n {
							t.Errorf("fill of a %d-byte message got %d bytes", n, len(p))
						}
						inSlot <- within(p, slotMemory(a.l))
						copy(p, pattern(i, n))
						return nil
					})
					if err != nil {
						t.Errorf("SendFunc %d: %v", n, err)
						return
					}
				}
			}()
			for i, n := range sizes {
				got, err := b.Recv(ctx, nil)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, pattern(i, n)) {
					t.Fatalf("message %d of %d bytes differs", i, n)
				}
				slotted := <-inSlot
				wantSlot := n > a.cfg.EagerLimit && slotMemory(a.l) != nil
				if slotted != wantSlot {
					t.Errorf("%d bytes written in a rendezvous slot: %v, want %v", n, slotted, wantSlot)
				}
			}
		})
	}
}

// TestSendFuncFillFailsSendsNothing: a fill that fails or panics sends
// nothing and gives its slot back; sizes out of range never reach fill.
func TestSendFuncFillFailsSendsNothing(t *testing.T) {
	for name, pair := range modes() {
		t.Run(name, func(t *testing.T) {
			a, b := pair(t, Config{Cells: 64, MaxMessage: 1 << 16, BulkSlots: 1})
			defer a.Close()
			defer b.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			boom := errors.New("boom")
			for _, n := range []int{10, 1 << 15} {
				for i := 0; i < 3; i++ {
					if err := a.SendFunc(ctx, n, func([]byte) error { return boom }); !errors.Is(err, boom) {
						t.Fatalf("%d bytes, fill failing: %v, want fill's error", n, err)
					}
					func() {
						defer func() {
							if r := recover(); r != boom {
								t.Fatalf("%d bytes, fill panicking: recovered %v", n, r)
							}
						}()
						a.SendFunc(ctx, n, func([]byte) error { panic(boom) })
					}()
				}
			}
			called := false
			fill := func([]byte) error { called = true; return nil }
			if err := a.SendFunc(ctx, -1, fill); err == nil {
				t.Error("SendFunc of -1 bytes succeeded")
			}
			if err := a.SendFunc(ctx, 1<<16+1, fill); !errors.Is(err, ErrTooLarge) {
				t.Errorf("SendFunc above MaxMessage: %v", err)
			}
			if called {
				t.Error("fill was called for a size out of range")
			}
			short, cancelShort := context.WithTimeout(ctx, 20*time.Millisecond)
			got, err := b.Recv(short, nil)
			cancelShort()
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("after failed fills: %d bytes, %v; nothing was to be sent", len(got), err)
			}
			// The one slot was given back every time: large messages still go.
			for i := 0; i < 3; i++ {
				want := pattern(i, 1<<15)
				sent := make(chan error, 1)
				go func() { sent <- a.SendFunc(ctx, len(want), func(p []byte) error { copy(p, want); return nil }) }()
				got, err := b.Recv(ctx, nil)
				if err != nil {
					t.Fatalf("large message %d after the failed fills: %v", i, err)
				}
				if err := <-sent; err != nil {
					t.Fatalf("large message %d after the failed fills: %v", i, err)
				}
				if !bytes.Equal(got, want) {
					t.Fatalf("large message %d differs", i)
				}
			}
			closed := make(chan error, 1)
			go func() { closed <- a.Close() }()
			select {
			case <-closed:
			case <-time.After(5 * time.Second):
				t.Fatal("Close hangs after a fill panicked")
			}
		})
	}
}

// TestSendFuncWaitsForSlotWithinContext: with every slot out (the peer not
// receiving), SendFunc gives up when its context ends; where fill writes
// the slot, without calling fill.
func TestSendFuncWaitsForSlotWithinContext(t *testing.T) {
	for name, pair := range modes() {
		t.Run(name, func(t *testing.T) {
			a, b := pair(t, Config{Cells: 64, MaxMessage: 1 << 16, BulkSlots: 1})
			defer a.Close()
			defer b.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := a.SendFunc(ctx, 1<<15, func(p []byte) error { return nil }); err != nil {
				t.Fatal(err)
			}
			short, cancelShort := context.WithTimeout(ctx, 30*time.Millisecond)
			defer cancelShort()
			called := false
			err := a.SendFunc(short, 1<<15, func([]byte) error { called = true; return nil })
			if !errors.Is(err, context.DeadlineExceeded) || called && slotMemory(a.l) != nil {
				t.Fatalf("SendFunc with the one slot out: %v (fill called: %v)", err, called)
			}
		})
	}
}

// TestCloseWaitsForFill: fill writes its slot while Close runs; Close waits
// for it (a shared ring unmapped under it would fault). Links without slots
// fill a buffer of their own, for which Close need not wait.
func TestCloseWaitsForFill(t *testing.T) {
	for name, pair := range providers {
		t.Run(name, func(t *testing.T) {
			a, b := pair(t, Config{Cells: 64, MaxMessage: 1 << 16})
			defer b.Close()
			if slotMemory(a.l) == nil {
				a.Close()
				t.Skip("fill writes a buffer of the package's, not the connection's")
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			filling := make(chan struct{})
			done := make(chan error, 1)
			go func() {
				done <- a.SendFunc(ctx, 1<<16, func(p []byte) error {
					close(filling)
					end := time.Now().Add(30 * time.Millisecond)
					for time.Now().Before(end) {
						for i := range p {
							p[i] = byte(i)
						}
					}
					return nil
				})
			}()
			<-filling
			start := time.Now()
			a.Close()
			if time.Since(start) < 10*time.Millisecond {
				t.Errorf("Close returned after %v, while fill still wrote", time.Since(start))
			}
			if err := <-done; err != nil && !errors.Is(err, ErrClosed) {
				t.Errorf("SendFunc closed under it: %v", err)
			}
		})
	}
}
