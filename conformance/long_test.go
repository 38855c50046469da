package conformance

import "os"

// longRun is set by RREF_LONG. The checks that the search's reductions and
// caches change nothing explore every scenario several times over, which
// under -race takes minutes on two loaded cores; the default run checks a
// fixed share of the scenarios, so that `go test -race ./...` stays well
// within go test's timeout, and .ci/run runs the whole of them with
// RREF_LONG set and a timeout of its own.
var longRun = os.Getenv("RREF_LONG") != ""

// sampleEvery: the default run keeps one scenario in this many, which
// still draws from the corpus's larger families (crashes, duplicates,
// orphans, the seed flows), and cuts the checks' time by three quarters:
// under -race on two heavily loaded cores the package's default run went
// past go test's ten minutes at one in three, with the corpus grown to 63.
// .ci/run's RREF_LONG run checks every scenario.
const sampleEvery = 4

// sampled is scs in a long run, else every sampleEvery-th of them, the
// same ones each time, so that a failure in the default run reproduces.
func sampled(scs []*Scenario) []*Scenario {
	if longRun {
		return scs
	}
	out := make([]*Scenario, 0, len(scs)/sampleEvery+1)
	for i := 0; i < len(scs); i += sampleEvery {
		out = append(out, scs[i])
	}
	return out
}
