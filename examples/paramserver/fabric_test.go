//go:build rreffabric && cgo && linux

package main

import "testing"

// TestProcessesOverFabric runs the example's processes over the libfabric
// provider (fabric:host:port addresses), in a build with it.
func TestProcessesOverFabric(t *testing.T) {
	runProcesses(t, []string{"-tags", "rreffabric"}, func(port string) string { return "fabric:127.0.0.1:" + port })
}
