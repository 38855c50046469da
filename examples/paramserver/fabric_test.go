//go:build rreffabric && cgo && linux

package main

import "testing"

// TestProcessesOverFabric runs the example's processes over the libfabric
// provider, in a build with it: fabric:host:port addresses (libfabric's
// default provider), and fabric:shm@host:port, which names its
// shared-memory provider.
func TestProcessesOverFabric(t *testing.T) {
	t.Run("default", func(t *testing.T) {
		runProcesses(t, []string{"-tags", "rreffabric"}, func(port string) string { return "fabric:127.0.0.1:" + port })
	})
	t.Run("shm", func(t *testing.T) {
		runProcesses(t, []string{"-tags", "rreffabric"}, func(port string) string { return "fabric:shm@127.0.0.1:" + port })
	})
}
