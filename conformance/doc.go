// Package conformance runs scenario files (the corpus is testdata/) against
// the pure protocol core in a simulated network whose scheduler may deliver
// any in-flight message next, explores the interleavings with package
// explore, and checks the invariants S1-S5 and L1-L2 declared in the RRef
// spec on every step. The same scenarios run against real workers
// (ExploreRuntime). README.md in this folder documents the scenario language.
package conformance

import "github.com/rrefkit/rref/internal/scenario"

// Scenario is a parsed scenario file.
type Scenario = scenario.Scenario

// Parse reads a scenario. Every problem is reported with its line number, and
// a malformed file is rejected whole, before anything runs.
func Parse(name string, src []byte) (*Scenario, error) { return scenario.Parse(name, src) }
