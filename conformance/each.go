package conformance

import (
	"iter"
	"sync"
)

// eachWindow is how many scenarios per goroutine ExploreEach lets run
// ahead of the oldest one not yet reported: results wait to be reported in
// order, and a slow scenario must not make the others pile up unbounded.
const eachWindow = 64

// ExploreEach explores every scenario scenarios yields, parallel at a
// time, each search on one goroutine of its own (opt.Workers is ignored),
// and hands each result to report in the order the scenarios came in,
// whatever order they finished in. It stops taking scenarios once report
// returns false, waits for the searches already under way and reports
// nothing more. It returns how many scenarios it reported.
//
// Many small searches gain nothing from several goroutines each (they
// would mostly explore the same states twice), but side by side they use
// every core: this is how an enumeration or a corpus runs in parallel.
// optFor, when set, makes the options of each scenario (a progress
// callback that names it, say); it is called on the goroutine that
// explores the scenario.
func ExploreEach(scenarios iter.Seq[*Scenario], parallel int, opt Options, optFor func(*Scenario, Options) Options, report func(*Scenario, Result) bool) int {
	parallel = max(parallel, 1)
	type job struct {
		i  int
		sc *Scenario
	}
	type done struct {
		job
		r Result
	}
	jobs := make(chan job)
	results := make(chan done)
	stop := make(chan struct{})
	window := make(chan struct{}, parallel*eachWindow) // a token per scenario taken and not yet reported
	var producer, searchers sync.WaitGroup
	producer.Add(1)
	go func() {
		defer producer.Done()
		defer close(jobs)
		i := 0
		for sc := range scenarios {
			select {
			case window <- struct{}{}:
			case <-stop:
				return
			}
			select {
			case jobs <- job{i, sc}:
				i++
			case <-stop:
				return
			}
		}
	}()
	for range parallel {
		searchers.Add(1)
		go func() {
			defer searchers.Done()
			for j := range jobs {
				o := opt
				if optFor != nil {
					o = optFor(j.sc, o)
				}
				o.Workers = 1
				results <- done{j, Explore(j.sc, o)}
			}
		}()
	}
	go func() {
		searchers.Wait()
		close(results)
	}()
	held := map[int]done{}
	next, stopped := 0, false
	for d := range results {
		if stopped {
			continue // drained, so that every searcher ends
		}
		held[d.i] = d
		for {
			d, ok := held[next]
			if !ok {
				break
			}
			delete(held, next)
			next++
			if !report(d.sc, d.r) {
				stopped = true
				close(stop)
				break
			}
			<-window // after the report: while it runs, its token still counts

		}
	}
	producer.Wait()
	return next
}
