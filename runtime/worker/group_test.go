package worker

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"
)

// groupRuns repeats TestGroupAcrossProcesses: go test -run
// TestGroupAcrossProcesses ./runtime/worker -args -group-runs 50
var groupRuns = flag.Int("group-runs", 1, "times each group of TestGroupAcrossProcesses starts")

type relayArg struct {
	Ref *RRef[int]
	Via []string
}

type handArg struct {
	Ref *RRef[int]
	To  string
}

// groupSetup registers the functions every member of a process group has:
// RRefs relayed along chains of non-owners, handed back through a third
// member, and made by the callee.
func groupSetup(w *Worker) {
	Register(w, "add", func(ctx context.Context, x [2]int) (int, error) { return x[0] + x[1], nil })
	Register(w, "make", func(ctx context.Context, v int) (*RRef[int], error) { return NewRRef(w, v) })
	Register(w, "keep", func(ctx context.Context, r *RRef[int]) (*RRef[int], error) { return r, nil })
	Register(w, "relay", func(ctx context.Context, a relayArg) (int, error) {
		if len(a.Via) == 0 {
			return a.Ref.ToHere(ctx)
		}
		return Call[int](ctx, w, a.Via[0], "relay", relayArg{Ref: a.Ref, Via: a.Via[1:]})
	})
	Register(w, "hand", func(ctx context.Context, a handArg) (*RRef[int], error) {
		return Call[*RRef[int]](ctx, w, a.To, "keep", a.Ref)
	})
}

// groupWork is what every member does at once, the moment its Start
// returns: for each other member as owner, a value created there travels
// through every other member (none its owner), one made by a third member
// goes the other way, and a value comes back through two non-owners.
func groupWork(ctx context.Context, w *Worker, names []string) error {
	others := slices.DeleteFunc(slices.Clone(names), func(n string) bool { return n == w.Name() })
	for k, owner := range others {
		var chain []string
		for i := range others {
			if n := others[(k+1+i)%len(others)]; n != owner {
				chain = append(chain, n)
			}
		}
		want := 1000*k + len(w.Name())
		r, err := Remote[int](ctx, w, owner, "add", [2]int{want, 0})
		if err != nil {
			return fmt.Errorf("remote on %s: %w", owner, err)
		}
		if len(chain) > 0 {
			if v, err := Call[int](ctx, w, chain[0], "relay", relayArg{Ref: r, Via: chain[1:]}); err != nil || v != want {
				return fmt.Errorf("value of %s relayed through %v: %d, %v", owner, chain, v, err)
			}
			made, err := Call[*RRef[int]](ctx, w, chain[0], "make", want+1)
			if err != nil {
				return fmt.Errorf("make on %s: %w", chain[0], err)
			}
			via := append([]string{owner}, chain[1:]...)
			if v, err := Call[int](ctx, w, via[0], "relay", relayArg{Ref: made, Via: via[1:]}); err != nil || v != want+1 {
				return fmt.Errorf("value of %s relayed through %v: %d, %v", chain[0], via, v, err)
			}
			made.Release()
			last := chain[len(chain)-1]
			back, err := Call[*RRef[int]](ctx, w, last, "hand", handArg{Ref: r, To: chain[0]})
			if err != nil {
				return fmt.Errorf("value of %s handed back by %s through %s: %w", owner, last, chain[0], err)
			}
			if v, err := back.ToHere(ctx); err != nil || v != want {
				return fmt.Errorf("value of %s handed back: %d, %v", owner, v, err)
			}
			back.Release()
		} else if v, err := r.ToHere(ctx); err != nil || v != want {
			return fmt.Errorf("value of %s: %d, %v", owner, v, err)
		}
		r.Release()
	}
	return nil
}

// runMember is one member of TestGroupAcrossProcesses in a process of its own.
func runMember(spec, self string) int {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	peers := parseSpec(spec)
	w, err := Start(ctx, self, peers, secret, Config{Logger: quiet, Setup: groupSetup})
	if err != nil {
		fmt.Fprintf(os.Stderr, "member %s: %v\n", self, err)
		return 2
	}
	var names []string
	for _, p := range peers {
		names = append(names, p.Name)
	}
	if err := groupWork(ctx, w, names); err != nil {
		fmt.Fprintf(os.Stderr, "member %s: %v\n", self, err)
		w.Close()
		return 1
	}
	sctx, scancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer scancel()
	if err := w.Shutdown(sctx); err != nil {
		fmt.Fprintf(os.Stderr, "member %s: %v\n", self, err)
		return 1
	}
	return 0
}

func groupPeers(transport string, n int) []Peer {
	peers := make([]Peer, n)
	for i := range peers {
		peers[i].Name = string(rune('A' + i))
		if transport == "shm" {
			peers[i].Addr = fmt.Sprintf("shm:gt%d", os.Getpid())
			continue
		}
		ln, _ := net.Listen("tcp", "127.0.0.1:0")
		peers[i].Addr = ln.Addr().String()
		ln.Close()
	}
	return peers
}

// TestGroupAcrossProcesses starts groups of 3 and 5 processes over tcp and
// shm, all members at once, each passing and returning RRefs between
// non-owners the moment its Start returns. A member used to drop a message
// for a peer whose link was not attached yet, and the group then hung.
func TestGroupAcrossProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("starts process groups")
	}
	for _, transport := range []string{"tcp", "shm"} {
		for _, n := range []int{3, 5} {
			t.Run(fmt.Sprintf("%s/%d", transport, n), func(t *testing.T) {
				for run := 0; run < *groupRuns; run++ {
					runGroup(t, transport, n)
				}
			})
		}
	}
}

func runGroup(t *testing.T, transport string, n int) {
	t.Helper()
	peers := groupPeers(transport, n)
	var spec []string
	for _, p := range peers {
		spec = append(spec, p.Name+"="+p.Addr)
	}
	var cmds []*exec.Cmd
	var stderr []*strings.Builder
	for _, p := range peers[1:] {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "RREF_WORKER_PEER="+strings.Join(spec, ";"), "RREF_WORKER_ROLE=member", "RREF_WORKER_SELF="+p.Name)
		var b strings.Builder
		cmd.Stderr = &b
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds, stderr = append(cmds, cmd), append(stderr, &b)
	}
	code := runMember(strings.Join(spec, ";"), peers[0].Name)
	var errs []error
	if code != 0 {
		errs = append(errs, fmt.Errorf("member A exited %d", code))
	}
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			errs = append(errs, fmt.Errorf("member %s: %v: %s", peers[i+1].Name, err, stderr[i]))
		}
	}
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
}
