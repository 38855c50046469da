//go:build rreffabric && cgo && linux

package worker

import (
	"context"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rrefkit/rref/fifo"
)

// TestGroupOverFabric starts a group of three whose links run over
// libfabric ("fabric:" addresses), passes RRefs between non-owners and
// shuts down with nothing leaked: with libfabric's default provider, and
// with each provider CI tests named in the addresses ("fabric:PROVIDER@").
func TestGroupOverFabric(t *testing.T) {
	available, err := fifo.FabricProviders()
	if err != nil {
		t.Fatal(err)
	}
	for _, provider := range []string{"", "shm", "tcp;ofi_rxm"} {
		name := provider
		if name == "" {
			name = "default"
		}
		t.Run(name, func(t *testing.T) {
			if provider != "" && !slices.Contains(available, provider) {
				t.Skipf("libfabric here has no %s: %v", provider, available)
			}
			groupOverFabric(t, provider)
		})
	}
}

func groupOverFabric(t *testing.T, provider string) {
	peers := make([]Peer, 3)
	for i := range peers {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := "fabric:" + ln.Addr().String()
		if provider != "" {
			addr = "fabric:" + provider + "@" + ln.Addr().String()
		}
		peers[i] = Peer{Name: string(rune('A' + i)), Addr: addr}
		ln.Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ws := startMembers(t, ctx, peers, Config{Logger: quiet, Setup: func(w *Worker) {
		Register(w, "add", func(ctx context.Context, x [2]int) (int, error) { return x[0] + x[1], nil })
		Register(w, "fetch", func(ctx context.Context, r *RRef[int]) (int, error) { return r.ToHere(ctx) })
	}})
	a := ws[0]
	r, err := Remote[int](ctx, a, "B", "add", [2]int{40, 2})
	if err != nil {
		t.Fatal(err)
	}
	if v, err := r.ToHere(ctx); err != nil || v != 42 {
		t.Fatalf("ToHere over fabric: %v %v", v, err)
	}
	// A passes B's value to C: a user to a user.
	if v, err := Call[int](ctx, a, "C", "fetch", r); err != nil || v != 42 {
		t.Fatalf("RRef passed to a user over fabric: %v %v", v, err)
	}
	big := make([]byte, 1<<20) // the rendezvous channel
	Register(ws[2], "len", func(ctx context.Context, b []byte) (int, error) { return len(b), nil })
	if n, err := Call[int](ctx, a, "C", "len", big); err != nil || n != len(big) {
		t.Fatalf("a 1 MiB argument over fabric: %v %v", n, err)
	}
	r.Release()
	sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer scancel()
	if err := ShutdownGroup(sctx, ws); err != nil {
		t.Fatal(err)
	}
}

// TestFabricGroupIsWhole: a group mixing fabric and tcp addresses is
// refused at Start, naming both.
func TestFabricGroupIsWhole(t *testing.T) {
	peers := []Peer{{"A", "fabric:127.0.0.1:1"}, {"B", "127.0.0.1:2"}}
	if _, err := Start(context.Background(), "A", peers, secret, Config{Logger: quiet}); err == nil {
		t.Fatal("a mixed group started")
	}
}

// TestFabricProviderNamedIsUsed: a provider named in the addresses is the
// one the links open: one libfabric does not have fails Start at once, by
// name (it showed as a peer that never answered, after the whole timeout).
func TestFabricProviderNamedIsUsed(t *testing.T) {
	peers := make([]Peer, 2)
	for i := range peers {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		peers[i] = Peer{Name: string(rune('A' + i)), Addr: "fabric:nosuch@" + ln.Addr().String()}
		ln.Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	errs := make(chan error, len(peers))
	for i := range peers {
		go func() {
			w, err := Start(ctx, peers[i].Name, peers, secret, Config{Logger: quiet})
			if w != nil {
				w.Close()
			}
			errs <- err
		}()
	}
	for range peers {
		if err := <-errs; err == nil {
			t.Fatal("a group on a provider libfabric does not have started")
		} else if !strings.Contains(err.Error(), `fabric provider "nosuch"`) {
			t.Errorf("Start on provider nosuch: %v; want the provider named", err)
		}
	}
}
