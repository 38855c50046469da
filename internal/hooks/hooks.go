// Package hooks reaches settings of the public packages that exist for the
// project's own tests and tools and are not part of their API: a public
// package sets each hook in its init, and only code in this module can
// import this package.
package hooks

import "time"

// WorkerJitter makes a worker.Config (cfg, a *worker.Config) hold each
// protocol message back by the duration jitter returns before sending it,
// so that messages overtake one another: the conformance suite's runtime
// target and the worker's own tests use it. Set by package worker.
var WorkerJitter func(cfg any, jitter func() time.Duration)

// WorkerRecordSites switches a worker's (w, a *worker.Worker) recording of
// reference creation sites (worker.Config.RecordRefSites) on or off while
// it runs, so that bench rpc measures its cost over one connection, on
// and off in turns. Set by package worker.
var WorkerRecordSites func(w any, on bool)
