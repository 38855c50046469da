package soak

import (
	"bufio"
	"context"
	crand "crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode"

	"github.com/rrefkit/rref/internal/freeport"
	"github.com/rrefkit/rref/internal/netfault"
	"github.com/rrefkit/rref/runtime/worker"
)

// Margins on top of the members' own bounds, for the parent's waits: a
// member reports after its bound passes, and a loaded host delays it.
const (
	reportMargin = 10 * time.Second
	// reapWait is how long an exiting member may take before it is killed.
	reapWait = 10 * time.Second
	// startAttempts: a round whose tcp port was taken meanwhile (the
	// parent picks free ports and a member listens on them later) starts
	// again with new ports, this many times at most.
	startAttempts = 3
	// stderrTail is how much of a member's standard error is kept for the
	// report when it misbehaves.
	stderrTail = 16 << 10
	// maxProblems are listed in the report; all are counted.
	maxProblems = 30
	// eventBuffer holds members' reports while the parent injects a fault.
	eventBuffer = 4096
)

// Run runs a soak: rounds until Options.Duration (or Options.Rounds), then
// returns the report. It returns an error only when it cannot run at all
// (a member process fails to start); what goes wrong in the group is in
// the report. Cancelling ctx ends the current round early and returns the
// report so far.
func Run(ctx context.Context, o Options) (*Report, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	o = o.withDefaults()
	if o.Seed == 0 {
		o.Seed = RandomSeed()
	}
	if o.Command == nil {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("soak: find this executable to start members: %w", err)
		}
		o.Command = []string{exe, "soak"}
	}
	secret := make([]byte, 32)
	crand.Read(secret)
	r := &runner{o: o, secret: secret, rep: newReport(o)}
	start := time.Now()
	for round := max(1, o.FirstRound); ; round++ {
		if o.Rounds > 0 {
			if round >= max(1, o.FirstRound)+o.Rounds {
				break
			}
		} else if round > max(1, o.FirstRound) && time.Since(start)+o.RoundTraffic > o.Duration {
			break
		}
		if ctx.Err() != nil {
			r.rep.Interrupted = true
			break
		}
		if err := r.round(ctx, plan(o, round)); err != nil {
			r.rep.Elapsed = time.Since(start)
			return r.rep, err
		}
	}
	r.rep.Elapsed = time.Since(start)
	if ctx.Err() != nil {
		r.rep.Interrupted = true
	}
	return r.rep, nil
}

// Command runs a soak as the rrefgen soak command does: it prints the
// seed first (to stderr, so it is there even if the run never ends), runs,
// prints the report (as JSON with fl.JSON) and returns the exit status:
// 0 when every counter that must be 0 is, 1 otherwise or when the run
// could not start.
func Command(ctx context.Context, stdout, stderr io.Writer, fl Flags) int {
	o := fl.Options
	if o.Seed == 0 {
		o.Seed = RandomSeed()
	}
	fmt.Fprintf(stderr, "rrefgen soak: seed %d\n", o.Seed)
	if fl.Verbose {
		o.Progress = func(s string) { fmt.Fprintln(stderr, "soak: "+s) }
	}
	rep, err := Run(ctx, o)
	if err != nil {
		// The package's errors say "soak: " already.
		fmt.Fprintf(stderr, "rrefgen soak: %s\n", strings.TrimPrefix(err.Error(), "soak: "))
		if rep == nil {
			return exitFail
		}
	}
	if fl.JSON {
		err = rep.WriteJSON(stdout)
	} else {
		err = rep.WriteText(stdout)
	}
	if err != nil {
		fmt.Fprintf(stderr, "rrefgen soak: %v\n", err)
		return exitFail
	}
	if !rep.OK() {
		return exitFail
	}
	return exitOK
}

// Exit statuses of Command, as the CLI's (0 ok, 1 failed check).
const (
	exitOK   = 0
	exitFail = 1
)

// RandomSeed picks a seed (never 0, which means "pick one").
func RandomSeed() uint64 {
	var b [8]byte
	crand.Read(b[:])
	return binary.LittleEndian.Uint64(b[:]) | 1
}

type runner struct {
	o      Options
	secret []byte
	rep    *Report
}

func memberNames(n int) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("m%d", i)
	}
	return names
}

// proc is one member process in a round.
type proc struct {
	idx    int
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	enc    *json.Encoder
	stderr *tail
	read   chan struct{} // closed once its standard output is read to the end

	killed, stopped, gone bool // gone: killed, or exited
	paused                bool // stopped by a pause fault (stopped too)
	up, quiet, done       bool
	stats                 *memberStats
	upStats               *memberStats // at Start: the baseline of its goroutines and heap
	doneInfo              *doneInfo
}

func (p *proc) live() bool { return !p.gone }

func (p *proc) send(c command) {
	// A member that died cannot read: its death is seen on its output.
	p.enc.Encode(c)
}

type procEvent struct {
	idx int
	ev  event
	eof bool
}

// tail keeps the end of a member's standard error.
type tail struct {
	mu  sync.Mutex
	buf []byte
}

func (t *tail) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, b...)
	if len(t.buf) > stderrTail {
		t.buf = append([]byte(nil), t.buf[len(t.buf)-stderrTail:]...)
	}
	return len(b), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.TrimSpace(string(t.buf))
}

// kill and reset records, for classifying failures.
type killRecord struct {
	member int
	at     int64 // Unix nanoseconds, taken just before the signal
}

// resetRecord is a reset or a stall of a link.
type resetRecord struct {
	link [2]int
	at   int64
}

// roundRun is one round in progress.
type roundRun struct {
	r      *runner
	plan   roundPlan
	names  []string
	procs  []*proc
	relays map[[2]int]*netfault.Relay
	evs    chan procEvent
	fails  []failure
	kills  []killRecord
	resets []resetRecord
	pauses []killRecord // members paused past DeadAfter, at the stop
	// deadTo[i]: bit j: member j's worker took member i for dead.
	deadTo []uint64
	// fenced: bit i: member i heard the group fence it.
	fenced uint64
	// finishing: the members were told to shut down; a peer's death seen
	// from then on may be the barrier closing links, not a verdict.
	finishing bool
	faults    map[string]int
	// problems found by the parent itself (a member crashed, a phase
	// timed out), counted as unexpected or hung.
	unexpected, hung int
}

func (r *runner) round(ctx context.Context, p roundPlan) error {
	for attempt := 1; ; attempt++ {
		rr := &roundRun{r: r, plan: p, names: memberNames(r.o.Members), relays: map[[2]int]*netfault.Relay{}, deadTo: make([]uint64, r.o.Members),
			evs: make(chan procEvent, eventBuffer), faults: map[string]int{}}
		retry, err := rr.run(ctx)
		if err != nil {
			return err
		}
		if retry && attempt < startAttempts {
			r.o.Progress(fmt.Sprintf("round %d: a tcp port was taken before its member listened; starting the round again", p.round))
			continue
		}
		rr.account()
		return nil
	}
}

// views gives each member its peer list: the same names and kinds of
// address for all, but a member's tcp link to an earlier member goes
// through that link's relay, so the parent can reset it alone.
func (rr *roundRun) views() ([][]worker.Peer, error) {
	n := len(rr.names)
	shmAddr := fmt.Sprintf("shm:soak%d-%d", os.Getpid(), rr.plan.round)
	// Loopback ports for every member, distinct, though the shared-memory
	// members use none; if one is taken before its member listens, the
	// round starts again.
	own, err := freeport.Loopback(n)
	if err != nil {
		return nil, err
	}
	for i := range own {
		if rr.plan.shm[i] {
			own[i] = shmAddr
		}
	}
	for i := range n {
		for j := i + 1; j < n; j++ {
			if !rr.plan.tcpLink(i, j) {
				continue
			}
			if rr.plan.shm[i] {
				return nil, fmt.Errorf("soak: member %d is shm but accepts tcp from %d (tcp members must come first)", i, j)
			}
			rl, err := netfault.NewRelay(own[i])
			if err != nil {
				return nil, err
			}
			rr.relays[[2]int{i, j}] = rl
		}
	}
	views := make([][]worker.Peer, n)
	for j := range n {
		views[j] = make([]worker.Peer, n)
		for i := range n {
			addr := own[i]
			if rl := rr.relays[[2]int{i, j}]; rl != nil {
				addr = rl.Addr() // j dials i through the relay
			}
			views[j][i] = worker.Peer{Name: rr.names[i], Addr: addr}
		}
	}
	return views, nil
}

func (rr *roundRun) startProc(i int, cfg memberConfig) error {
	o := rr.r.o
	cmd := exec.Command(o.Command[0], o.Command[1:]...)
	// A race-enabled member would sleep a second on exit, waiting for late
	// reports (see internal/bench).
	race := "GORACE=atexit_sleep_ms=0"
	if v := os.Getenv("GORACE"); v != "" {
		race += " " + v
	}
	cmd.Env = append(os.Environ(), memberEnv+"=1", race)
	p := &proc{idx: i, cmd: cmd, stderr: &tail{}, read: make(chan struct{})}
	cmd.Stderr = p.stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("soak: start member %s: %w", rr.names[i], err)
	}
	p.stdin, p.enc = stdin, json.NewEncoder(stdin)
	rr.procs = append(rr.procs, p)
	go func() {
		defer close(p.read)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64<<10), 4<<20) // a failure line carries an error text; a stats line a few maps
		for sc.Scan() {
			var e event
			if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
				e = event{Ev: "garbage", Err: fmt.Sprintf("%q: %v", sc.Text(), err)}
			}
			rr.evs <- procEvent{idx: i, ev: e}
		}
		rr.evs <- procEvent{idx: i, eof: true}
	}()
	p.send(command{Cmd: cmdConfig, Config: &cfg})
	return nil
}

// run runs the round once; retry reports a start that failed on a port
// taken meanwhile.
func (rr *roundRun) run(ctx context.Context) (retry bool, err error) {
	o := rr.r.o
	defer rr.cleanup()
	views, err := rr.views()
	if err != nil {
		return false, fmt.Errorf("soak: round %d: %w", rr.plan.round, err)
	}
	for i := range rr.names {
		cfg := memberConfig{Round: rr.plan.round, Self: i, Names: rr.names, Peers: views[i], Secret: rr.r.secret,
			Seed: o.Seed, Clients: o.Clients, OpDeadline: o.OpDeadline, InnerDeadline: innerDeadline(o.OpDeadline),
			ShutdownTimeout: o.ShutdownTimeout, StartTimeout: o.StartTimeout, Inject: o.Inject, HangFor: o.HangFor, DeadAfter: o.DeadAfter}
		if err := rr.startProc(i, cfg); err != nil {
			return false, err
		}
	}

	// Start: every member up.
	var startErrs []string
	rr.await(o.StartTimeout+reportMargin, func() bool {
		for _, p := range rr.procs {
			if !p.up && p.live() {
				return false
			}
		}
		return true
	}, func(p *proc, e procEvent) {
		if e.ev.Ev == evStartFail {
			startErrs = append(startErrs, fmt.Sprintf("%s: %s", rr.names[p.idx], e.ev.Err))
		}
	})
	for _, p := range rr.procs {
		if !p.up && len(startErrs) == 0 {
			startErrs = append(startErrs, fmt.Sprintf("%s: not up after %v: %s", rr.names[p.idx], o.StartTimeout+reportMargin, p.stderr))
		}
	}
	if len(startErrs) > 0 {
		joined := strings.Join(startErrs, "; ")
		if strings.Contains(joined, "address already in use") {
			return true, nil
		}
		rr.problem(&rr.unexpected, "the group did not start: %s", joined)
		return false, nil
	}

	// Traffic, with the plan's faults.
	rr.r.o.Progress(fmt.Sprintf("round %d: %s", rr.plan.round, rr.plan.describe(rr.names)))
	for _, p := range rr.procs {
		p.send(command{Cmd: cmdGo})
	}
	t0 := time.Now()
	for _, fe := range rr.plan.events {
		if !rr.sleepUntil(ctx, t0.Add(fe.at)) {
			break
		}
		rr.inject(fe)
	}
	rr.sleepUntil(ctx, t0.Add(rr.plan.traffic))
	for _, p := range rr.procs {
		if p.stopped && p.live() { // interrupted mid-stop
			syscall.Kill(p.cmd.Process.Pid, syscall.SIGCONT)
			p.stopped = false
		}
	}

	// Quiet: operations drain; each client releases what it left with others.
	for _, p := range rr.procs {
		if p.live() {
			p.send(command{Cmd: cmdStop})
		}
	}
	quietWait := o.OpDeadline*(maxHolds+1) + reportMargin
	if !rr.await(quietWait, func() bool { return rr.all(func(p *proc) bool { return p.quiet }) }, nil) {
		for _, p := range rr.procs {
			if p.live() && !p.quiet {
				rr.problem(&rr.hung, "%s did not finish its traffic within %v", rr.names[p.idx], quietWait)
			}
		}
	}

	// Finish: Shutdown across the group.
	for _, p := range rr.procs {
		if p.live() {
			rr.finishing = true
			p.send(command{Cmd: cmdFinish})
		}
	}
	doneWait := o.ShutdownTimeout + reportMargin
	if !rr.await(doneWait, func() bool { return rr.all(func(p *proc) bool { return p.done }) }, nil) {
		for _, p := range rr.procs {
			if p.live() && !p.done {
				rr.problem(&rr.hung, "%s did not return from Shutdown within %v", rr.names[p.idx], doneWait)
			}
		}
	}
	return false, nil
}

// innerDeadline bounds a call a member's function makes (forward, hand,
// fetch): short of the operation's, so a hang deep in a chain is reported
// as such before the outermost caller gives up, and long enough for a stop.
func innerDeadline(op time.Duration) time.Duration { return op * 2 / 3 }

// all reports whether every live member satisfies f.
func (rr *roundRun) all(f func(*proc) bool) bool {
	for _, p := range rr.procs {
		if p.live() && !f(p) {
			return false
		}
	}
	return true
}

// sleepUntil handles members' reports until t; it reports false if ctx
// ended first (the traffic then ends early).
func (rr *roundRun) sleepUntil(ctx context.Context, t time.Time) bool {
	timer := time.NewTimer(time.Until(t))
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return false
		case <-timer.C:
			return true
		case e := <-rr.evs:
			rr.handle(e, nil)
		}
	}
}

// await handles members' reports until cond holds or d passes, and reports
// whether cond held. on, when set, also sees each report.
func (rr *roundRun) await(d time.Duration, cond func() bool, on func(*proc, procEvent)) bool {
	timer := time.NewTimer(d)
	defer timer.Stop()
	for !cond() {
		select {
		case <-timer.C:
			return false
		case e := <-rr.evs:
			rr.handle(e, on)
		}
	}
	return true
}

func (rr *roundRun) handle(e procEvent, on func(*proc, procEvent)) {
	p := rr.procs[e.idx]
	if on != nil {
		on(p, e)
	}
	if e.eof {
		if !p.gone && !p.done {
			// Exited on its own before it was done: a crash (a panic in the
			// runtime, an os.Exit), whatever phase it was in.
			rr.problem(&rr.unexpected, "%s exited during the round: %s", rr.names[p.idx], p.stderr)
			rr.tellDead(p.idx)
		}
		p.gone = true
		return
	}
	switch e.ev.Ev {
	case evUp:
		p.up, p.upStats = true, e.ev.Stats
	case evStartFail:
		p.gone = true // it exits
	case evStats:
		p.stats = e.ev.Stats
	case evQuiet:
		p.quiet, p.stats = true, e.ev.Stats
	case evDone:
		p.done, p.doneInfo = true, e.ev.Done
	case evFail:
		if e.ev.Fail != nil {
			rr.fails = append(rr.fails, *e.ev.Fail)
		}
	case evPeerDead:
		if m := e.ev.Member; m >= 0 && m < len(rr.deadTo) && !rr.finishing {
			rr.deadTo[m] |= 1 << uint(p.idx)
		}
	case evFenced:
		rr.fenced |= 1 << uint(p.idx)
	default:
		rr.problem(&rr.unexpected, "%s sent %q: %s", rr.names[p.idx], e.ev.Ev, e.ev.Err)
	}
}

// tellDead tells the live members that member i is gone, so they stop
// choosing it.
func (rr *roundRun) tellDead(i int) {
	for _, q := range rr.procs {
		if q.idx != i && q.live() {
			q.send(command{Cmd: cmdDead, Member: i})
		}
	}
}

// inject applies one fault of the plan.
func (rr *roundRun) inject(fe faultEvent) {
	switch fe.kind {
	case FaultStop, evCont, FaultKill, FaultPause, evPauseEnd:
		p := rr.procs[fe.member]
		if !p.live() {
			return // killed earlier in the round
		}
		pid := p.cmd.Process.Pid
		switch fe.kind {
		case FaultStop:
			if p.stopped {
				return // two stops overlap: the first one's cont resumes it
			}
			syscall.Kill(pid, syscall.SIGSTOP)
			p.stopped = true
			rr.faults[FaultStop]++
		case FaultPause:
			if p.stopped {
				return // a stop already holds it: its cont would cut the pause short
			}
			rr.pauses = append(rr.pauses, killRecord{member: fe.member, at: time.Now().UnixNano()})
			syscall.Kill(pid, syscall.SIGSTOP)
			p.stopped, p.paused = true, true
			rr.faults[FaultPause]++
		case evPauseEnd:
			if p.paused {
				syscall.Kill(pid, syscall.SIGCONT)
				p.stopped, p.paused = false, false
			}
		case evCont:
			if p.stopped && !p.paused {
				syscall.Kill(pid, syscall.SIGCONT)
				p.stopped = false
			}
		case FaultKill:
			rr.kills = append(rr.kills, killRecord{member: fe.member, at: time.Now().UnixNano()})
			syscall.Kill(pid, syscall.SIGKILL)
			p.killed, p.gone, p.stopped = true, true, false
			rr.faults[FaultKill]++
			rr.tellDead(fe.member)
		}
	case FaultReset:
		a, b := fe.link[0], fe.link[1]
		if !rr.procs[a].live() || !rr.procs[b].live() {
			return
		}
		rl := rr.relays[fe.link]
		rr.resets = append(rr.resets, resetRecord{link: fe.link, at: time.Now().UnixNano()})
		if rl.Reset() > 0 {
			rr.faults[FaultReset]++
		}
	case FaultStall:
		a, b := fe.link[0], fe.link[1]
		if !rr.procs[a].live() || !rr.procs[b].live() {
			return
		}
		rr.resets = append(rr.resets, resetRecord{link: fe.link, at: time.Now().UnixNano()})
		rr.relays[fe.link].Stall(fe.dur)
		rr.faults[FaultStall]++
	}
}

func (rr *roundRun) problem(counter *int, format string, args ...any) {
	*counter++
	rr.r.rep.addProblem(fmt.Sprintf("round %d: ", rr.plan.round) + fmt.Sprintf(format, args...))
	rr.r.o.Progress(fmt.Sprintf("round %d: PROBLEM: ", rr.plan.round) + fmt.Sprintf(format, args...))
}

// cleanup ends the round's processes and relays, whatever state they are in.
func (rr *roundRun) cleanup() {
	for _, p := range rr.procs {
		if p.stopped {
			syscall.Kill(p.cmd.Process.Pid, syscall.SIGCONT)
		}
		// A member exits when its standard input closes: one that is done
		// was exiting anyway, and one that is not is stuck (and reported).
		p.stdin.Close()
	}
	deadline := time.Now().Add(reapWait)
	for _, p := range rr.procs {
		exited := make(chan struct{})
		go func() {
			// Reading its output to the end comes before Wait (os/exec).
			<-p.read
			close(exited)
		}()
		// Drain reports meanwhile: a member blocked writing one never exits.
	wait:
		for {
			select {
			case <-exited:
				break wait
			case e := <-rr.evs:
				rr.handle(e, nil)
			case <-time.After(time.Until(deadline)):
				if !p.killed {
					rr.problem(&rr.hung, "%s did not exit within %v of its round's end", rr.names[p.idx], reapWait)
				}
				p.cmd.Process.Kill()
				p.killed = true
			}
		}
		err := p.cmd.Wait()
		var ee *exec.ExitError
		switch {
		case p.killed:
		case errors.As(err, &ee) && p.done:
			rr.problem(&rr.unexpected, "%s exited with %v after its shutdown: %s", rr.names[p.idx], err, p.stderr)
		}
	}
	for {
		select {
		case e := <-rr.evs:
			rr.handle(e, nil)
			continue
		default:
		}
		break
	}
	for _, rl := range rr.relays {
		rl.Close()
	}
}

// checkVerdicts holds each member paused past DeadAfter to one verdict: it
// was fenced by every member still in the group, or by none. A member
// fenced is then as good as killed at its pause: operations that involve
// it may fail (rr.kills).
func (rr *roundRun) checkVerdicts() {
	for _, pr := range rr.pauses {
		x := pr.member
		var live uint64 // the members that must agree: all but it and those killed
		for _, p := range rr.procs {
			if p.idx != x && !slices.ContainsFunc(rr.kills, func(k killRecord) bool { return k.member == p.idx }) {
				live |= 1 << uint(p.idx)
			}
		}
		by := rr.deadTo[x] & live
		heard := rr.fenced&(1<<uint(x)) != 0
		switch {
		case by == 0 && !heard:
			rr.r.rep.PausedAlive++ // no link took it for dead: it ran on
			continue
		case by != live:
			rr.r.rep.Split++
			rr.problemOnly("SPLIT verdict on %s, paused past DeadAfter: fenced by %s, not by %s", rr.names[x], rr.involved(by), rr.involved(live&^by))
		}
		rr.r.rep.PausedFenced++
		rr.kills = append(rr.kills, pr)
	}
	for _, p := range rr.procs {
		if rr.fenced&(1<<uint(p.idx)) != 0 && !slices.ContainsFunc(rr.pauses, func(k killRecord) bool { return k.member == p.idx }) {
			rr.problemOnly("%s was fenced by the group, though never paused", rr.names[p.idx])
			rr.r.rep.Split++
		}
	}
}

// account classifies the round's failures and adds its figures to the report.
func (rr *roundRun) account() {
	rep := rr.r.rep
	before := rep.tally()
	rr.checkVerdicts()
	rep.Rounds++
	for k, v := range rr.faults {
		rep.Faults[k] += v
	}
	rep.Unexpected += rr.unexpected
	rep.Hung += rr.hung
	for _, p := range rr.procs {
		if up, q := p.upStats, p.stats; up != nil && q != nil && p.quiet && !p.killed && !p.paused {
			// After traffic drained, what a member holds above its start:
			// held values, pooled buffers and idle links, but not a
			// goroutine or heap per operation run.
			rep.GoroutineGrowth = max(rep.GoroutineGrowth, q.Goroutines-up.Goroutines)
			rep.HeapGrowth = max(rep.HeapGrowth, int64(q.HeapBytes)-int64(up.HeapBytes))
			rep.GoroutinesMax = max(rep.GoroutinesMax, q.Goroutines)
		}
		if s := p.stats; s != nil {
			for k, v := range s.Started {
				rep.op(k).Started += v
			}
			for k, v := range s.OK {
				rep.op(k).OK += v
			}
			for k, v := range s.Calls {
				rep.Calls[k] += v
			}
			rep.OKAfterKill += s.OKAfterDeath
			if p.doneInfo == nil {
				rep.MessagesSent += s.MessagesSent
			}
		}
		if d := p.doneInfo; d != nil {
			rep.MessagesSent += d.MessagesSent
			rep.HeldForDead += d.HeldForDead
			rep.HeldForLive += d.HeldForLive
			rep.Illegal += d.Illegal
			rep.BadInput += d.BadInput
			rep.Leaked += d.Records
			if d.Records > 0 {
				rr.problemOnly("%s leaked %d references at shutdown%s: %s", rr.names[p.idx], d.Records, rr.namesKilled(d.Leak), d.Leak)
			}
			if d.Unsettled {
				rep.Unsettled++
				rr.problemOnly("%s: %s", rr.names[p.idx], d.Leak)
			}
			if d.Err != "" {
				rep.Unexpected++
				rr.problemOnly("%s: Shutdown: %s", rr.names[p.idx], d.Err)
			}
			if d.Illegal > 0 {
				rr.problemOnly("%s: %d illegal transitions", rr.names[p.idx], d.Illegal)
			}
		}
	}
	for _, f := range rr.fails {
		oc := rep.op(f.Kind)
		what := fmt.Sprintf("%s op %d.%d %s (involving %s) after %v: %s", rr.names[f.Member], f.Client, f.Op, f.Kind,
			rr.involved(f.Involved), time.Duration(f.End-f.Start).Round(time.Millisecond), f.Err)
		switch {
		case f.Class == classWrong:
			oc.Wrong++
			rep.Wrong++
			rr.problemOnly("WRONG %s", what)
		case f.Class == classHung:
			oc.Hung++
			rep.Hung++
			rr.problemOnly("HUNG %s", what)
		case f.Class == classPeer && rr.killExplains(f) && rr.blamesKilled(f):
			oc.FailedKill++
			rep.FailedKill++
		case f.Class == classPeer && rr.killExplains(f):
			// A member it involved was killed, but the failure names
			// only members that were not: a loss the kill cannot have
			// caused, hidden until now by the kill beside it.
			oc.Unexpected++
			rep.Unexpected++
			rep.Unrelated++
			rr.problemOnly("UNRELATED %s: blames none of the members killed or fenced (%s)", what, rr.killedNames(f))
		default:
			oc.Unexpected++
			rep.Unexpected++
			if rr.resetExplains(f) {
				rep.UnexpectedOnReset++
			}
			rr.problemOnly("UNEXPECTED %s", what)
		}
	}
	rr.r.o.Progress(fmt.Sprintf("round %d: done: %s", rr.plan.round, rep.tally().since(before)))
}

// namesKilled points out the records of a leak that name a member killed
// in the round as a fork's holder or a pinned child (core ids are index+1):
// references the kill should have reclaimed.
func (rr *roundRun) namesKilled(leak string) string {
	n := 0
	killed := map[string]bool{}
	for _, line := range strings.Split(leak, "\n") {
		for _, k := range rr.kills {
			id := fmt.Sprint(k.member + 1)
			for _, f := range strings.Fields(line) {
				if f == "holder="+id || f == "child="+id {
					n++
					killed[rr.names[k.member]] = true
				}
			}
		}
	}
	if n == 0 {
		return ""
	}
	var who []string
	for name := range killed {
		who = append(who, name)
	}
	slices.Sort(who)
	return fmt.Sprintf(" (%d of them held by or pinned for %s, killed in this round: not reclaimed)", n, strings.Join(who, ", "))
}

func (rr *roundRun) problemOnly(format string, args ...any) {
	rr.r.rep.addProblem(fmt.Sprintf("round %d: ", rr.plan.round) + fmt.Sprintf(format, args...))
}

func (rr *roundRun) involved(mask uint64) string {
	var s []string
	for i, n := range rr.names {
		if mask&(1<<uint(i)) != 0 {
			s = append(s, n)
		}
	}
	return strings.Join(s, ",")
}

// killExplains reports whether a member the failed operation involved was
// killed before the failure was seen.
func (rr *roundRun) killExplains(f failure) bool {
	for _, k := range rr.kills {
		if f.Involved&(1<<uint(k.member)) != 0 && k.at <= f.End {
			return true
		}
	}
	return false
}

// blamesKilled reports whether f's error could come from a member killed
// (or fenced) before it was seen, or seen by one. A peer or owner failure names the member
// that failed (the callee, the value's owner, the member fenced): that
// member must be one of them. A lost RRef names no one when its value was
// never confirmed (its creator or a forwarder died before the owner heard
// of it), so it is the kill's only if no member it names is alive.
func (rr *roundRun) blamesKilled(f failure) bool {
	var killed uint64
	for _, k := range rr.kills {
		if k.at <= f.End {
			killed |= 1 << uint(k.member)
		}
	}
	if killed&(1<<uint(f.Member)) != 0 {
		// The member that saw it was killed or fenced itself: once fenced,
		// it takes every peer for dead, whichever it names.
		return true
	}
	named := rr.namedIn(f.Err)
	if named == 0 {
		return strings.Contains(f.Err, worker.ErrLost.Error())
	}
	return named&killed != 0
}

// namedIn is the set of members whose names appear in text as words.
func (rr *roundRun) namedIn(text string) uint64 {
	var named uint64
	for _, word := range strings.FieldsFunc(text, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }) {
		if i := slices.Index(rr.names, word); i >= 0 {
			named |= 1 << uint(i)
		}
	}
	return named
}

// killedNames lists the members killed or fenced before f was seen.
func (rr *roundRun) killedNames(f failure) string {
	var mask uint64
	for _, k := range rr.kills {
		if k.at <= f.End {
			mask |= 1 << uint(k.member)
		}
	}
	return rr.involved(mask)
}

// resetExplains reports whether the operation involved both ends of a link
// reset before the failure was seen (still unexpected: the transport is to
// reconnect and resume).
func (rr *roundRun) resetExplains(f failure) bool {
	for _, r := range rr.resets {
		if f.Involved&(1<<uint(r.link[0])) != 0 && f.Involved&(1<<uint(r.link[1])) != 0 && r.at <= f.End {
			return true
		}
	}
	return false
}
