package cli

import (
	"context"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/rrefkit/rref/internal/soak"
)

func init() {
	register(command{"soak", "run a group of member processes under random traffic and faults (stop, kill, reset, stall)", runSoak})
}

func runSoak(env *Env, args []string) int {
	// A member process is this executable again, started as "rrefgen
	// soak" with soak's environment variable set: it serves its round.
	if soak.IsMember() {
		return soak.ServeMember()
	}
	fs := newFlags(env, "soak", "[-n 3..8] [-transport tcp|shm|mixed] [-d DURATION] [-faults stop,kill,reset,stall] [-seed N] [-rounds N] [-json]", `
soak starts -n member processes of this executable, forming a group with
worker.Start over loopback tcp (through relays this process owns), shared
memory, or both (mixed), and has them call one another at random: Call, Go,
Remote and ToHere, NewRRef, RRefs passed to a third member, returned,
forwarded along chains, cloned, held and released. Every value follows from
the seed, so every result is checked. Meanwhile it injects faults at times
drawn from the seed: stop (SIGSTOP a member for 0.2-3 s: must fail
nothing), kill (SIGKILL: only operations that involve the killed member may
fail, and with an error), reset (an RST on one tcp link: it must resume
and fail nothing) and stall (one tcp link passes nothing for 0.2-3 s: must
fail nothing); over shm, which has no tcp link, the default leaves reset
and stall out. It runs in rounds, each a fresh
group ending in worker.Shutdown, and prints what ran and the counters
wrong, hung, leaked, unsettled, failed unexpectedly and illegal. Exit
status 1 unless all are 0. An interrupt ends the current round early and
reports; a second one ends the process.`)
	finish := soak.BindFlags(fs)
	if st := parseFlags(env, fs, args); st >= 0 {
		return st
	}
	fl, err := finish()
	if err != nil {
		return usageError(env, "soak", "%s", strings.TrimPrefix(err.Error(), "soak: "))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		stop() // a second interrupt ends the process at once
	}()
	return soak.Command(ctx, env.Stdout, env.Stderr, fl)
}
