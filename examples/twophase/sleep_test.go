package main

import (
	"testing"

	"github.com/rrefkit/rref/internal/worldtest"
	"github.com/rrefkit/rref/protocol/world"
)

// TestSleepSetsKeepEveryState: the world's sleep sets skip only orders of
// steps that commute, over the correct world, the seeded bug's and a
// larger one.
func TestSleepSetsKeepEveryState(t *testing.T) {
	worldtest.SleepSetsKeepEveryState(t, map[string]world.Config{"correct": worldConfig(2, 2, false), "seeded bug": worldConfig(2, 2, true), "larger": worldConfig(3, 1, false)})
}
