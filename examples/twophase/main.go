// Command twophase is two-phase commit of one transaction with a
// coordinator that crashes and recovers from its log (tpc.rspec), its
// handlers written once (handlers.go): with no flags it explores them (the
// correct coordinator through crashes, then one that commits on the first
// yes); with -node it runs one node of a group over tcp.
//
//	go run ./examples/twophase
//	go run ./examples/twophase -node coord -state /tmp/coord.log -peers coord=127.0.0.1:7000,p1=127.0.0.1:7001
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/rrefkit/rref/examples/twophase/tpcpb"
	"github.com/rrefkit/rref/explore"
	"github.com/rrefkit/rref/fifo"
	"github.com/rrefkit/rref/protocol"
	"github.com/rrefkit/rref/protocol/node"
	"github.com/rrefkit/rref/protocol/world"
)

// pollEvery is how often a program looks at its node's state.
const pollEvery = 10 * time.Millisecond

// exitCrashed is the status of a coordinator that crashed on purpose.
const exitCrashed = 3

// deadAfter is how long a silent link lives: short, so that participants
// link again soon to a coordinator that restarted.
const deadAfter = 3 * time.Second

func main() {
	name := flag.String("node", "", "run this node of the group (coord, p1, p2, ...) instead of exploring")
	peers := flag.String("peers", "", "the group: name=host:port,... (with -node)")
	state := flag.String("state", "", "the coordinator's log file (with -node coord)")
	crash := flag.Bool("crash-after-decision", false, "the coordinator exits once its decision is logged, before sending it")
	vote := flag.Bool("yes", true, "how a participant votes")
	flag.Parse()
	if *name != "" {
		if err := runNode(protocol.NodeID(*name), *peers, *state, *crash, *vote); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}
	failed := false
	for _, v := range []struct {
		title string
		eager bool
	}{{"coordinator, crashing twice", false}, {"coordinator committing early", true}} {
		start, err := world.Start(worldConfig(2, 2, v.eager))
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		r := explore.Explore(start, explore.Options{})
		fmt.Printf("%-30s %6d states  ", v.title, r.States)
		if r.Passed() {
			fmt.Println("ok")
		} else {
			fmt.Printf("FAIL %v (replay: %s)\n", r.Violation, r.ScheduleString())
			for i, s := range r.Trace {
				fmt.Printf("    %2d  %s\n", i+1, s)
			}
		}
		failed = failed || r.Passed() == v.eager
	}
	if failed {
		os.Exit(1)
	}
}

func runNode(name protocol.NodeID, peerList, state string, crash, yes bool) error {
	ps, err := node.ParsePeers(peerList)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cfg := node.Config{Name: name, Peers: ps, Secret: []byte("twophase example"), StateFile: state, FIFO: fifo.Config{DeadAfter: deadAfter}}
	if name != coordinator {
		n, err := node.Start(ctx, cfg, tpcpb.ParticipantRole(func() tpcpb.ParticipantHandler { return &Participant{Coordinator: coordinator} }))
		if err != nil {
			return err
		}
		defer n.Close()
		if err := await(ctx, n, func(s int) bool { return s == int(tpcpb.ParticipantAsked) }); err != nil {
			return err
		}
		if err := node.Input(ctx, n, map[bool]tpcpb.ParticipantEvent{true: tpcpb.ParticipantOnVoteYes, false: tpcpb.ParticipantOnVoteNo}[yes]); err != nil {
			return err
		}
		return await(ctx, n, func(s int) bool { return tpcpb.ParticipantState(s).IsFinal() })
	}
	if crash {
		cfg.AfterSave = func(m any) {
			if l, ok := m.(*tpcpb.Log); ok && l.Decided {
				fmt.Println("coord crashes after logging its decision")
				os.Exit(exitCrashed)
			}
		}
	}
	var participants []protocol.NodeID
	for _, p := range ps {
		if p.Name != coordinator {
			participants = append(participants, p.Name)
		}
	}
	n, err := node.Start(ctx, cfg, tpcpb.CoordinatorRole(func() tpcpb.CoordinatorHandler { return NewCoordinator(participants, false) }))
	if err != nil {
		return err
	}
	defer n.Close()
	if err := node.Input(ctx, n, tpcpb.CoordinatorOnBegin); err != nil && !errors.Is(err, node.ErrDisabled) {
		return err // disabled: it recovered a transaction from its log
	}
	return await(ctx, n, func(s int) bool { return s == int(tpcpb.CoordinatorDone) })
}

// await waits until node n's state satisfies done, and says which it is.
func await(ctx context.Context, n *node.Node, done func(state int) bool) error {
	for {
		var st int
		if err := n.Inspect(ctx, func(s int, _ any) { st = s }); err != nil {
			return err
		}
		if done(st) {
			if n.Self() == coordinator {
				fmt.Println(n.Self(), tpcpb.CoordinatorState(st))
			} else {
				fmt.Println(n.Self(), tpcpb.ParticipantState(st))
			}
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %w", n.Self(), ctx.Err())
		case <-n.Done():
			return n.Err()
		case <-time.After(pollEvery):
		}
	}
}
