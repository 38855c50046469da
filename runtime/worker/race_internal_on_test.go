//go:build race

package worker

// raceDetector is raceEnabled for the package's internal tests.
const raceDetector = true
