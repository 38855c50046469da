package netfault

import (
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestRelayReset: a reset breaks the connection through the relay on both
// sides at once, and the relay takes a new connection to the same address.
func TestRelayReset(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	upErrs := make(chan error, 4)
	wg.Add(1)
	go func() { // an echo server, reporting how each connection ended
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				_, err := io.Copy(c, c)
				upErrs <- err
			}()
		}
	}()
	defer func() { ln.Close(); wg.Wait() }()
	rl, err := NewRelay(ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer rl.Close()
	echo := func() net.Conn {
		c, err := net.Dial("tcp", rl.Addr())
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(10 * time.Second))
		buf := make([]byte, 5)
		if _, err := c.Write([]byte("hello")); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "hello" {
			t.Fatalf("through the relay: %q, %v", buf, err)
		}
		return c
	}
	c := echo()
	if n := rl.Reset(); n != 1 {
		t.Fatalf("reset broke %d connections, want 1", n)
	}
	if _, err := c.Read(make([]byte, 1)); err == nil || !strings.Contains(err.Error(), "reset") {
		t.Errorf("the dialer's side after a reset: %v, want a connection reset", err)
	}
	c.Close()
	if err := <-upErrs; err == nil || !strings.Contains(err.Error(), "reset") {
		t.Errorf("the listener's side after a reset: %v, want a connection reset", err)
	}
	echo().Close() // the same address again
	if err := <-upErrs; err != nil {
		t.Errorf("a clean close through the relay: %v", err)
	}
}

// TestRelayRefuse: a refusing relay resets new connections at once, and
// forwards them again when it stops refusing.
func TestRelayRefuse(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("x"))
			c.Close()
		}
	}()
	rl, err := NewRelay(ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer rl.Close()
	read := func() error {
		c, err := net.Dial("tcp", rl.Addr())
		if err != nil {
			return err
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(10 * time.Second))
		_, err = io.ReadFull(c, make([]byte, 1))
		return err
	}
	rl.SetRefuse(true)
	if err := read(); err == nil {
		t.Error("a refusing relay forwarded a connection")
	}
	rl.SetRefuse(false)
	if err := read(); err != nil {
		t.Errorf("after refusing: %v", err)
	}
	if rl.Resets() != 0 {
		t.Errorf("%d resets counted, want 0", rl.Resets())
	}
}

// TestRelayStall: during a stall nothing passes and nothing closes; what
// was sent passes when it ends, and a stall started during another keeps
// the later end.
func TestRelayStall(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(c, c); c.Close() }()
		}
	}()
	rl, err := NewRelay(ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer rl.Close()
	c, err := net.Dial("tcp", rl.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	roundTrip := func(wait time.Duration) error {
		if _, err := c.Write([]byte("x")); err != nil {
			return err
		}
		c.SetReadDeadline(time.Now().Add(wait))
		_, err := io.ReadFull(c, make([]byte, 1))
		return err
	}
	if err := roundTrip(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	const stall = 400 * time.Millisecond
	begin := time.Now()
	rl.Stall(stall / 2)
	rl.Stall(stall) // extends the first
	var ne net.Error
	if err := roundTrip(stall / 4); !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("a byte passed a stall: %v", err)
	}
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadFull(c, make([]byte, 1)); err != nil {
		t.Fatalf("after the stall: %v", err)
	}
	if d := time.Since(begin); d < stall {
		t.Errorf("the echo came back %v into a %v stall", d, stall)
	}
	if err := roundTrip(10 * time.Second); err != nil {
		t.Fatalf("the connection after the stall: %v", err)
	}
	if rl.Stalls() != 2 || rl.Active() != 1 {
		t.Errorf("stalls %d, active %d; want 2 and 1", rl.Stalls(), rl.Active())
	}
}
