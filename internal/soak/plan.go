package soak

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"
)

// A round's plan (which members are tcp or shm, which faults strike whom
// and when) comes from the seed and the round's number alone, so a round
// is the same whenever it runs, and -from replays one round of a long run.
// The traffic's values come from the seed too (see ops.go); what no seed
// fixes is the interleaving, which is the point of running for hours.

// planStream separates the plans' random streams from the traffic's.
const planStream = 0x5eed_91a7

// Per-round fault counts beyond the first round (the first has one of each
// kind selected, so even a one-round run exercises every kind).
const (
	maxStopsPerRound  = 3
	maxResetsPerRound = 2
	maxStallsPerRound = 2
	// maxPausesPerRound: one member paused past DeadAfter a round; a
	// second would often find the first already fenced.
	maxPausesPerRound = 1
	// killChanceOutOf: a round after the first has kills with probability
	// 3/4, so some rounds check that a clean group fails nothing at all.
	killChanceOutOf = 4
)

// Where in a round's traffic faults may strike, as fractions of it: late
// enough that traffic is under way, early enough that the group is seen
// to keep working after a kill.
const (
	faultFrom  = 0.10
	killUntil  = 0.70
	resetUntil = 0.80
	// stopShare caps a stop at this share of the round, so short rounds
	// (tests) still have traffic around a stop.
	stopShare = 0.40
)

// maxKills is how many members one round may kill: at least one, and
// never so many that fewer than half of the group is left to work.
func maxKills(n int) int { return max(1, (n-2)/2) }

type faultEvent struct {
	at     time.Duration // from the start of traffic
	kind   string        // FaultStop, FaultKill, FaultReset, FaultStall, or evCont
	member int           // stop, cont, kill
	dur    time.Duration // stop, stall
	link   [2]int        // reset, stall: the two members, lower first
}

// evCont resumes a stopped member; evPauseEnd a paused one (a stop's end
// must not cut a pause short).
const (
	evCont     = "cont"
	evPauseEnd = "pauseend"
)

type roundPlan struct {
	round   int
	traffic time.Duration
	// deadAfter is the members' DeadAfter: stops and stalls, which must
	// fail nothing, stay well under it.
	deadAfter time.Duration
	shm       []bool // member i joins the round's shm group
	events    []faultEvent
}

func (p roundPlan) tcpLink(i, j int) bool { return !(p.shm[i] && p.shm[j]) }

func plan(o Options, round int) roundPlan {
	rng := rand.New(rand.NewPCG(o.Seed, mix(uint64(round))^planStream))
	n := o.Members
	p := roundPlan{round: round, traffic: o.RoundTraffic, deadAfter: o.DeadAfter, shm: make([]bool, n)}
	switch o.Transport {
	case TransportSHM:
		for i := range p.shm {
			p.shm[i] = true
		}
	case TransportMixed:
		// tcp members first: worker.Start has the earlier member of a pair
		// accept over tcp, which an shm-only member cannot.
		tcp := 1 + rng.IntN(n-1)
		for i := tcp; i < n; i++ {
			p.shm[i] = true
		}
	}
	T := float64(p.traffic)
	at := func(from, until float64) time.Duration {
		return time.Duration(T * (from + rng.Float64()*(until-from)))
	}
	if slices.Contains(o.Faults, FaultKill) {
		k := 1
		if round > 1 {
			k = 0
			if rng.IntN(killChanceOutOf) != 0 {
				k = 1 + rng.IntN(maxKills(n))
			}
		}
		for _, m := range rng.Perm(n)[:k] {
			p.events = append(p.events, faultEvent{at: at(faultFrom, killUntil), kind: FaultKill, member: m})
		}
	}
	if slices.Contains(o.Faults, FaultStop) {
		k := 1
		if round > 1 {
			k = rng.IntN(maxStopsPerRound + 1)
		}
		for range k {
			d, start := p.window(rng)
			m := rng.IntN(n)
			p.events = append(p.events, faultEvent{at: start, kind: FaultStop, member: m, dur: d},
				faultEvent{at: start + d, kind: evCont, member: m})
		}
	}
	if slices.Contains(o.Faults, FaultPause) {
		k := 1
		if round > 1 {
			k = rng.IntN(maxPausesPerRound + 1)
		}
		for range k {
			d := time.Duration((MinPause + rng.Float64()*(MaxPause-MinPause)) * float64(o.DeadAfter))
			// Room after it for the group's verdict and traffic without it.
			latest := max(time.Duration(T*faultFrom), p.traffic-d-o.DeadAfter)
			start := time.Duration(T*faultFrom) + time.Duration(rng.Int64N(int64(latest-time.Duration(T*faultFrom))+1))
			m := rng.IntN(n)
			p.events = append(p.events, faultEvent{at: start, kind: FaultPause, member: m, dur: d},
				faultEvent{at: start + d, kind: evPauseEnd, member: m})
		}
	}
	if slices.Contains(o.Faults, FaultReset) || slices.Contains(o.Faults, FaultStall) {
		// A link to a member killed this round may be gone before its
		// reset or stall: pick links between survivors, where there are any.
		killed := map[int]bool{}
		for _, e := range p.events {
			if e.kind == FaultKill {
				killed[e.member] = true
			}
		}
		var links, survivors [][2]int
		for i := range n {
			for j := i + 1; j < n; j++ {
				if p.tcpLink(i, j) {
					links = append(links, [2]int{i, j})
					if !killed[i] && !killed[j] {
						survivors = append(survivors, [2]int{i, j})
					}
				}
			}
		}
		if len(survivors) > 0 {
			links = survivors
		}
		// Round 1 has one of each fault chosen, so a one-round run
		// exercises them all; later rounds draw how many.
		count := func(most int) int {
			if round == 1 {
				return 1
			}
			return rng.IntN(most + 1)
		}
		if slices.Contains(o.Faults, FaultReset) {
			for range count(maxResetsPerRound) {
				if len(links) > 0 {
					p.events = append(p.events, faultEvent{at: at(faultFrom, resetUntil), kind: FaultReset, link: links[rng.IntN(len(links))]})
				}
			}
		}
		if slices.Contains(o.Faults, FaultStall) {
			for range count(maxStallsPerRound) {
				if len(links) > 0 {
					d, start := p.window(rng)
					p.events = append(p.events, faultEvent{at: start, kind: FaultStall, link: links[rng.IntN(len(links))], dur: d})
				}
			}
		}
	}
	slices.SortStableFunc(p.events, func(a, b faultEvent) int { return cmp.Compare(a.at, b.at) })
	return p
}

// stopUnderDeadAfter: a stop or a stall lasts at most DeadAfter over this,
// so that a peer's liveness check, which ticks beside it, never sees the
// silence reach DeadAfter: with -dead-after 2s, 3 s stops fenced members
// that were to fail nothing.
const stopUnderDeadAfter = 2

// window draws a fault lasting MinStop-MaxStop (at most stopShare of the
// traffic) and its start, so that it ends inside the traffic with traffic
// around it.
func (p roundPlan) window(rng *rand.Rand) (d, start time.Duration) {
	T := float64(p.traffic)
	longest := min(MaxStop, time.Duration(T*stopShare), p.deadAfter/stopUnderDeadAfter)
	d = MinStop + time.Duration(rng.Int64N(int64(longest-MinStop)+1))
	latest := max(time.Duration(T*faultFrom), p.traffic-d-time.Duration(T*faultFrom))
	start = time.Duration(T*faultFrom) + time.Duration(rng.Int64N(int64(latest-time.Duration(T*faultFrom))+1))
	return d, start
}

// describe is the plan in one line, as the round's progress prints it.
func (p roundPlan) describe(names []string) string {
	var tcp, shm int
	for _, s := range p.shm {
		if s {
			shm++
		} else {
			tcp++
		}
	}
	var parts []string
	for _, e := range p.events {
		s := e.at.Round(time.Millisecond).String()
		switch e.kind {
		case FaultStop:
			parts = append(parts, fmt.Sprintf("stop %s@%s for %s", names[e.member], s, e.dur.Round(time.Millisecond)))
		case FaultPause:
			parts = append(parts, fmt.Sprintf("pause %s@%s for %s", names[e.member], s, e.dur.Round(time.Millisecond)))
		case FaultKill:
			parts = append(parts, fmt.Sprintf("kill %s@%s", names[e.member], s))
		case FaultReset:
			parts = append(parts, fmt.Sprintf("reset %s-%s@%s", names[e.link[0]], names[e.link[1]], s))
		case FaultStall:
			parts = append(parts, fmt.Sprintf("stall %s-%s@%s for %s", names[e.link[0]], names[e.link[1]], s, e.dur.Round(time.Millisecond)))
		}
	}
	if len(parts) == 0 {
		parts = append(parts, "no faults")
	}
	return fmt.Sprintf("%d tcp + %d shm members, %s traffic, %s", tcp, shm, p.traffic, strings.Join(parts, ", "))
}
