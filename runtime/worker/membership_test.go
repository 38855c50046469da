package worker

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	groupwire "github.com/rrefkit/rref/generated/group"
)

// freeTCP is a loopback address no one listens on yet.
func freeTCP(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// shmGroupSeq keeps the shm groups of one test process apart.
var shmGroupSeq atomic.Uint64

func freeSHM() string { return fmt.Sprintf("shm:mt%d-%d", os.Getpid(), shmGroupSeq.Add(1)) }

// startEach starts every member of lists (a member's name to the peer list
// it is given) at once in this process, and returns each one's worker or
// error.
func startEach(ctx context.Context, lists map[string][]Peer) (map[string]*Worker, map[string]error) {
	type result struct {
		name string
		w    *Worker
		err  error
	}
	results := make(chan result, len(lists))
	for name, peers := range lists {
		go func() {
			w, err := Start(ctx, name, peers, secret, Config{Logger: quiet, Setup: groupSetup})
			results <- result{name, w, err}
		}()
	}
	ws, errs := map[string]*Worker{}, map[string]error{}
	for range lists {
		r := <-results
		if r.err != nil {
			errs[r.name] = r.err
		} else {
			ws[r.name] = r.w
		}
	}
	return ws, errs
}

// sameList gives every member of peers the same list.
func sameList(peers []Peer) map[string][]Peer {
	lists := map[string][]Peer{}
	for _, p := range peers {
		lists[p.Name] = peers
	}
	return lists
}

// exerciseGroup checks a started group: every member passes RRefs through the
// others at once, then all shut down with nothing leaked.
func exerciseGroup(t *testing.T, ctx context.Context, peers []Peer, ws map[string]*Worker) {
	t.Helper()
	var names []string
	for _, p := range peers {
		names = append(names, p.Name)
	}
	errs := make(chan error, len(ws))
	for _, w := range ws {
		go func() { errs <- groupWork(ctx, w, names) }()
	}
	for range ws {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	var all []*Worker
	for _, w := range ws {
		all = append(all, w)
	}
	if err := ShutdownGroup(ctx, all); err != nil {
		t.Error(err)
	}
}

// TestStartAnyOrderAndMix starts groups whose shm members are listed before
// their tcp members, whose names are listed against their sort order, and
// mixes of both. Start used to dereference a nil listener when a member on
// shared memory alone was listed before a tcp member (only the tcp-first
// order worked).
func TestStartAnyOrderAndMix(t *testing.T) {
	for _, kinds := range []string{"shm tcp", "tcp shm", "shm shm tcp", "tcp shm tcp shm", "tcp tcp", "shm tcp tcp shm shm"} {
		t.Run(strings.ReplaceAll(kinds, " ", "-"), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			shm := freeSHM()
			var peers []Peer
			for i, k := range strings.Fields(kinds) {
				// Names against the list's order: z, y, x, ...
				p := Peer{Name: string(rune('z' - i)), Addr: shm}
				if k == "tcp" {
					p.Addr = freeTCP(t)
				}
				peers = append(peers, p)
			}
			ws, errs := startEach(ctx, sameList(peers))
			for name, err := range errs {
				t.Fatalf("%s: %v", name, err)
			}
			exerciseGroup(t, ctx, peers, ws)
		})
	}
}

// TestStartRefusesListsThatDiffer gives members the same members in another
// order, or another transport for one of them. They used to start, and
// RRefs then reached the wrong workers; now the members whose lists differ
// refuse each other with ErrGroupMismatch naming both lists, and no member
// starts.
func TestStartRefusesListsThatDiffer(t *testing.T) {
	cases := []struct {
		name  string
		kinds string // the members' transports, in the first list's order
		other func(peers []Peer) []Peer
	}{
		{"reordered", "tcp tcp tcp", func(p []Peer) []Peer { return []Peer{p[0], p[2], p[1]} }},
		{"reversed-pair", "tcp tcp", func(p []Peer) []Peer { return []Peer{p[1], p[0]} }},
		{"reordered-shm", "shm shm shm", func(p []Peer) []Peer { return []Peer{p[0], p[2], p[1]} }},
		{"reordered-mixed", "shm tcp shm", func(p []Peer) []Peer { return []Peer{p[2], p[1], p[0]} }},
		{"transport", "tcp tcp", func(p []Peer) []Peer {
			return []Peer{p[0], {Name: p[1].Name, Addr: freeSHM()}}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// The members whose links fail on the mismatch fail at once; a
			// member none of whose links meets one fails at this deadline.
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			shm := freeSHM()
			var peers []Peer
			for i, k := range strings.Fields(tc.kinds) {
				p := Peer{Name: string(rune('a' + i)), Addr: shm}
				if k == "tcp" {
					p.Addr = freeTCP(t)
				}
				peers = append(peers, p)
			}
			lists := sameList(peers)
			odd := peers[1].Name // the member given the other list
			lists[odd] = tc.other(peers)
			ws, errs := startEach(ctx, lists)
			for name, w := range ws {
				w.Close()
				t.Errorf("%s started on lists that differ", name)
			}
			mismatch := 0
			for name, err := range errs {
				var me *GroupMismatchError
				if !errors.As(err, &me) {
					t.Logf("%s: %v", name, err)
					continue
				}
				mismatch++
				if !errors.Is(err, ErrGroupMismatch) {
					t.Errorf("%s: %v does not match ErrGroupMismatch", name, err)
				}
				if me.SelfView == me.PeerView || !strings.Contains(err.Error(), me.SelfView) || !strings.Contains(err.Error(), me.PeerView) {
					t.Errorf("%s: %v: want both lists named", name, err)
				}
			}
			if mismatch < 2 {
				t.Errorf("%d members refused the mismatch by name, want at least the two ends of a link: %v", mismatch, errs)
			}
		})
	}
}

// startTCPPair starts members a and b over tcp and returns them.
func startTCPPair(t *testing.T, ctx context.Context) ([]Peer, *Worker, *Worker) {
	t.Helper()
	peers := []Peer{{"a", freeTCP(t)}, {"b", freeTCP(t)}}
	ws, errs := startEach(ctx, sameList(peers))
	for name, err := range errs {
		t.Fatalf("%s: %v", name, err)
	}
	return peers, ws["a"], ws["b"]
}

// TestStartRefusesASecondMemberOfOneName: a second process under a member's
// name, started beside the running group, used to fail only at its
// deadline, with a reason that blamed the network ("never answered");
// it is refused at once and told why, and the group runs on.
func TestStartRefusesASecondMemberOfOneName(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	peers, a, b := startTCPPair(t, ctx)
	defer a.Close()
	defer b.Close()
	// The deadline is far: a refusal is what must end this Start.
	w, err := Start(ctx, "b", peers, secret, Config{Logger: quiet})
	if err == nil {
		w.Close()
		t.Fatal("a second b started")
	}
	var re *RefusedError
	if !errors.As(err, &re) || !errors.Is(err, ErrNotAdmitted) || re.Reason != groupwire.RefusalReasonMemberConnected || re.By != "a" {
		t.Fatalf("a second b: %v; want a's refusal: b is already connected", err)
	}
	if !strings.Contains(err.Error(), "b is already connected to a") {
		t.Errorf("the refusal says %q", err)
	}
	if ctx.Err() != nil {
		t.Fatal("the refusal came at the deadline, not at once")
	}
	if v, err := Call[int](ctx, b, "a", "add", [2]int{2, 3}); err != nil || v != 5 {
		t.Errorf("the group after the refusal: %d, %v", v, err)
	}
}

// TestStartRefusesARestartedMember: a member restarted under its name
// after a crash cannot rejoin the running group (its old self's references
// were reclaimed); it is told so at once rather than timing out.
func TestStartRefusesARestartedMember(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	peers := []Peer{{"a", freeTCP(t)}, {"b", freeTCP(t)}}
	failed := make(chan struct{})
	started := make(chan *Worker, 1)
	go func() {
		a, err := Start(ctx, "a", peers, secret, Config{Logger: quiet, OnPeerFailed: func(string, error) { close(failed) }})
		if err != nil {
			t.Error(err)
		}
		started <- a
	}()
	b, err := Start(ctx, "b", peers, secret, Config{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	a := <-started
	if a == nil {
		t.FailNow()
	}
	defer a.Close()
	b.Close() // b crashes
	select {
	case <-failed:
	case <-ctx.Done():
		t.Fatal("a never saw b fail")
	}
	w, err := Start(ctx, "b", peers, secret, Config{Logger: quiet})
	if err == nil {
		w.Close()
		t.Fatal("b rejoined a running group")
	}
	var re *RefusedError
	if !errors.As(err, &re) || re.Reason != groupwire.RefusalReasonGroupRunning {
		t.Fatalf("a restarted b: %v; want a's refusal: the group is running", err)
	}
	if ctx.Err() != nil {
		t.Fatal("the refusal came at the deadline, not at once")
	}
}

// TestStartRefusesOneOfTwoRacingMembers: two processes under one name that
// start with the group, racing for their links: one is taken, the other
// refused at once.
func TestStartRefusesOneOfTwoRacingMembers(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	peers := []Peer{{"a", freeTCP(t)}, {"b", freeTCP(t)}}
	type result struct {
		w   *Worker
		err error
	}
	res := make(chan result, 3)
	for _, name := range []string{"a", "b", "b"} {
		go func() {
			w, err := Start(ctx, name, peers, secret, Config{Logger: quiet, Setup: groupSetup})
			res <- result{w, err}
		}()
	}
	var started []*Worker
	var refused []error
	for range 3 {
		r := <-res
		if r.err != nil {
			refused = append(refused, r.err)
		} else {
			started = append(started, r.w)
		}
	}
	for _, w := range started {
		defer w.Close()
	}
	if len(started) != 2 || len(refused) != 1 || !errors.Is(refused[0], ErrNotAdmitted) {
		t.Fatalf("%d started, refused: %v; want a and one b started, the other b refused", len(started), refused)
	}
}

// memberKinds are the addresses the property tests draw members from:
// good ones of every transport, and every kind of bad one.
var (
	goodKinds = []string{"tcp", "shm", "fabric"}
	badKinds  = []string{"shm2", "shm-empty", "mem", "port0", "garbage", "empty", "nul"}
)

func addrOfKind(kind string, i int, shm string) string {
	switch kind {
	case "tcp":
		return fmt.Sprintf("127.0.0.1:%d", 20000+i)
	case "shm":
		return shm
	case "shm2":
		return shm + "-other"
	case "shm-empty":
		return "shm:"
	case "fabric":
		return fmt.Sprintf("fabric:127.0.0.1:%d", 20000+i)
	case "mem":
		return "mem:x"
	case "port0":
		return "127.0.0.1:0"
	case "garbage":
		return "no port here"
	case "nul":
		return "shm:a\x00b"
	}
	return ""
}

// TestPlanGroupProperty draws 10,000 member lists (every order and mix of
// transports, duplicate and empty names, bad addresses) and checks that
// each is refused with ErrBadGroup naming a member, or makes a group whose
// every link has exactly one dialer (or creator), whose view both ends
// compute alike from the same list, and whose view changes with the order.
func TestPlanGroupProperty(t *testing.T) {
	rng := rand.New(rand.NewPCG(33, 1))
	shm := "shm:prop"
	accepted := 0
	for range 10000 {
		n := 1 + rng.IntN(7)
		peers := make([]Peer, n)
		for i := range peers {
			name := string(rune('a' + rng.IntN(26)))
			if rng.IntN(20) == 0 {
				name = ""
			}
			kind := goodKinds[rng.IntN(2)] // tcp and shm mix; fabric groups are whole
			switch {
			case i == 0 && rng.IntN(4) == 0:
				kind = "fabric"
			case i > 0 && peers[0].Addr == addrOfKind("fabric", 0, shm) && rng.IntN(8) != 0:
				kind = "fabric"
			case rng.IntN(12) == 0:
				kind = badKinds[rng.IntN(len(badKinds))]
			}
			peers[i] = Peer{Name: name, Addr: addrOfKind(kind, i, shm)}
		}
		g, err := planGroup(peers, secret)
		if err != nil {
			if !errors.Is(err, ErrBadGroup) {
				t.Fatalf("%v: %v does not match ErrBadGroup", peers, err)
			}
			continue
		}
		accepted++
		for a := range peers {
			for b := range peers {
				if a == b {
					continue
				}
				ra, rb := g.role(a, b), g.role(b, a)
				ok := ra == roleDial && rb == roleAccept || ra == roleAccept && rb == roleDial ||
					ra == roleCreate && rb == roleAttach || ra == roleAttach && rb == roleCreate
				if !ok {
					t.Fatalf("%v: %s and %s: roles %d and %d", peers, peers[a].Name, peers[b].Name, ra, rb)
				}
				if ra == roleAccept && g.addrs[a].kind == kindSHM {
					t.Fatalf("%v: %s accepts but has no tcp address", peers, peers[a].Name)
				}
			}
		}
		g2, _ := planGroup(slices.Clone(peers), secret)
		if g2.view != g.view || string(g2.identity) != string(g.identity) {
			t.Fatalf("%v: two views of one list: %q, %q", peers, g.view, g2.view)
		}
		if n > 1 {
			swapped := slices.Clone(peers)
			swapped[0], swapped[1] = swapped[1], swapped[0]
			if g3, err := planGroup(swapped, secret); err != nil || g3.view == g.view {
				t.Fatalf("%v: reordered: %v, same view %q", peers, err, g.view)
			}
		}
	}
	if accepted < 1000 {
		t.Fatalf("only %d of 10000 lists made a group: the draw reaches little", accepted)
	}
	t.Logf("%d of 10000 lists made a group", accepted)
}

// TestStartRandomGroups starts random lists of tcp and shm members (any
// order, any mix) for real: each starts whole and works, or every member
// is refused at once with ErrBadGroup. A member that panics fails the run.
func TestStartRandomGroups(t *testing.T) {
	rng := rand.New(rand.NewPCG(33, 2))
	runs := 12
	if testing.Short() {
		runs = 4
	}
	for run := range runs {
		n := 2 + rng.IntN(3)
		shm := freeSHM()
		peers := make([]Peer, n)
		bad := rng.IntN(4) == 0
		for i, name := range rng.Perm(n) {
			peers[i] = Peer{Name: string(rune('a' + name)), Addr: shm}
			if rng.IntN(2) == 0 {
				peers[i].Addr = freeTCP(t)
			}
		}
		if bad {
			switch rng.IntN(3) {
			case 0:
				peers[rng.IntN(n)].Name = peers[0].Name
				if n > 1 && peers[1].Name != peers[0].Name {
					peers[1].Name = peers[0].Name
				}
			case 1:
				peers[rng.IntN(n)].Addr = "shm:"
			case 2:
				peers[rng.IntN(n)].Addr = shm + "-other"
				peers[0].Addr, peers[1].Addr = shm, shm
			}
		}
		t.Run(fmt.Sprint(run), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			_, planErr := planGroup(peers, secret)
			lists := map[string][]Peer{}
			for _, p := range peers {
				lists[p.Name] = peers
			}
			ws, errs := startEach(ctx, lists)
			if planErr != nil {
				for name, w := range ws {
					w.Close()
					t.Errorf("%s started on %v, which %v", name, peers, planErr)
				}
				for name, err := range errs {
					if !errors.Is(err, ErrBadGroup) {
						t.Errorf("%s on %v: %v; want ErrBadGroup", name, peers, err)
					}
				}
				return
			}
			for name, err := range errs {
				t.Fatalf("%s on %v: %v", name, peers, err)
			}
			exerciseGroup(t, ctx, peers, ws)
		})
	}
}
