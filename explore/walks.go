package explore

import (
	"fmt"
	"math"
	"math/rand"
	"time"
)

// walks runs seeded random or PCT schedules; each failure replays from its seed.
func walks[M Model[M]](start func() M, opt Options, began time.Time, watch *watch) Result {
	var r Result
	log := watch.log("the walker")
	defer log.finish()
	hash := newHasher()
	seen := map[stateKey]bool{}
	var buf []byte
	stopCoverage := startCoverage(start, opt)
	var failedBy *Violation
	for i := 0; i < opt.Walks; i++ {
		if opt.Timeout > 0 && time.Since(began) > opt.Timeout {
			r.Truncated = fmt.Sprintf("time bound %v reached after %d walks", opt.Timeout, i)
			break
		}
		gather := seen
		if len(seen) >= opt.MaxStates {
			gather = nil // the walks go on; only the count of distinct states stops
		}
		seed := opt.Seed + int64(i)
		path, v, long := walk(start, opt, seed, hash, gather, &buf, log)
		r.Schedules++
		if long {
			r.Truncated = fmt.Sprintf("walk %d (seed %d) ran past the depth bound %d: the run may never end", i+1, seed, opt.MaxDepth)
			r.Seed, r.Schedule = seed, path
			break
		}
		if v != nil {
			failedBy, r.Schedule, r.Seed = v, path, seed
			break
		}
	}
	stopCoverage(&r) // before the replay: the walks' steps only
	if failedBy != nil {
		res, _ := confirm(start, r.Schedule, failedBy)
		r.Violation, r.Trace = res.Violation, res.Trace
		r.NotShortest = fmt.Sprintf("%s walks report the first failing schedule they meet, not the shortest (the exhaustive mode finds that)", opt.Mode)
	}
	r.States = len(seen)
	if (opt.Liveness || opt.WeakFairness) && r.Violation == nil && r.Truncated == "" {
		r.Truncated = fmt.Sprintf("liveness unchecked: %s walks do not look for cycles (the exhaustive search does)", opt.Mode)
	}
	return r
}

// walk runs one schedule. PCT gives every event a random priority when first
// seen, always takes the highest, and at Depth random steps demotes the top.
// seen, when not nil, gathers the states passed through. long reports a
// walk stopped by the depth bound. A panic in the model's code is a
// violation on the path so far, the step that met it last.
func walk[M Model[M]](start func() M, opt Options, seed int64, hash hasher, seen map[stateKey]bool, buf *[]byte, log *stepLog) (path []int, v *Violation, long bool) {
	log.reset()
	defer func() {
		if p := recover(); p != nil {
			v, long = panicked(p), false
		}
	}()
	rng := rand.New(rand.NewSource(seed))
	m := start()
	prio := map[string]float64{}
	changes := map[int]bool{}
	for i := 0; i < opt.Depth; i++ {
		changes[rng.Intn(pctHorizon)] = true
	}
	for step := 0; step < opt.MaxDepth; step++ {
		if seen != nil {
			*buf = m.AppendState((*buf)[:0])
			seen[hash.key(*buf)] = true
		}
		choices := m.Choices()
		if len(choices) == 0 {
			m.CheckEnd()
			return path, m.Violation(), false
		}
		pos := rng.Intn(len(choices))
		if opt.Mode == PCT {
			best := math.Inf(-1)
			for p, c := range choices {
				key := m.ChoiceKey(c)
				pr, ok := prio[key]
				if !ok {
					pr = rng.Float64()
					prio[key] = pr
				}
				if pr > best {
					best, pos = pr, p
				}
			}
			if changes[step] {
				prio[m.ChoiceKey(choices[pos])] = -rng.Float64()
			}
		}
		path = append(path, pos)
		log.push(pos)
		m.Step(choices[pos])
		if v := m.Violation(); v != nil {
			return path, v, false
		}
	}
	return path, nil, true
}

// pctHorizon is the range PCT draws its change points from: about the
// length of a scenario's schedule, so that most change points fall inside it.
const pctHorizon = 64
