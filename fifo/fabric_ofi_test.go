//go:build rreffabric && cgo && linux

package fifo

import (
	"context"
	"net"
	"os"
	"testing"
	"time"
)

// fabricProvider is the libfabric provider the tests use:
// RREF_FABRIC_PROVIDER, or libfabric's choice.
var fabricProvider = os.Getenv("RREF_FABRIC_PROVIDER")

func init() {
	providers["fabric"] = fabricPair
}

func fabricPair(t testing.TB, cfg Config) (*Conn, *Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var a *Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		a, err = AcceptFabric(ctx, ln, secret, cfg, WithProvider(fabricProvider))
	}()
	b, derr := DialFabric(ctx, ln.Addr().String(), secret, cfg, WithProvider(fabricProvider))
	<-done
	if err != nil || derr != nil {
		if a != nil {
			a.Close()
		}
		if b != nil {
			b.Close()
		}
		t.Fatal(err, derr)
	}
	return a, b
}

func TestFabricProviders(t *testing.T) {
	p, err := FabricProviders()
	t.Log(p, err)
	if err != nil || len(p) == 0 {
		t.Fatal(p, err)
	}
}

func TestFabricSmoke(t *testing.T) {
	a, b := fabricPair(t, Config{Cells: 64, MaxMessage: 1 << 20})
	defer a.Close()
	defer b.Close()
	ctx := context.Background()
	for i, n := range []int{0, 1, 56, 57, 1000, 4000, 100000, 1 << 20} {
		if err := a.Send(ctx, pattern(i, n)); err != nil {
			t.Fatal(err)
		}
		got, err := b.Recv(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(pattern(i, n)) {
			t.Fatalf("message %d of %d bytes differs", i, n)
		}
	}
}

// shiftTx and shiftRx move an idle link's counters (wrap_test.go).
func (l *fabricLink) shiftTx(pos uint64) { l.txCred.Store(pos) }
func (l *fabricLink) shiftRx(pos uint64, seq uint32) {
	l.landing.nextPos, l.landing.nextSeq = pos, seq
}
