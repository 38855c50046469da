//go:build !rrefmutants

package conformance

// activeMutant is 0: a build without the mutants runs the core as it is.
func activeMutant() int { return 0 }
