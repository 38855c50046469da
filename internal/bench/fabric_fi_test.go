//go:build rreffabric

package bench

import (
	"os/exec"
	"testing"
)

// TestFiPingpongRow runs libfabric's fi_pingpong, when libfabric-bin is
// installed, at every latency size: each cell is filled.
func TestFiPingpongRow(t *testing.T) {
	if _, err := exec.LookPath(fiPingpong); err != nil {
		t.Skip("no fi_pingpong (Debian: libfabric-bin)")
	}
	rows := fiPingpongRow(0, func(string) {})
	if len(rows) != 1 {
		t.Fatalf("%d rows", len(rows))
	}
	r := rows[0]
	if r.Err != "" {
		t.Fatal(r.Err)
	}
	for _, size := range LatencySizes {
		if r.LatencyNs[size] <= 0 {
			t.Errorf("%s: no latency at %d B", r.Transport, size)
		}
	}
	if r.Bandwidth[1<<20] <= 0 {
		t.Errorf("%s: no bandwidth at 1 MiB", r.Transport)
	}
}
