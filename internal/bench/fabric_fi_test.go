//go:build rreffabric

package bench

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestFiPingpongRow runs libfabric's fi_pingpong, when libfabric-bin is
// installed, at every latency size: each cell is filled.
func TestFiPingpongRow(t *testing.T) {
	if _, err := exec.LookPath(fiPingpong); err != nil {
		t.Skip("no fi_pingpong (Debian: libfabric-bin)")
	}
	rows := fiPingpongRow(0, func(string) {})
	prov, _ := benchFabricProvider()
	want := 1
	if tcpBased(prov) {
		want = 2 // and tcp's connected endpoints
	}
	if len(rows) != want {
		t.Fatalf("%d rows over %s, want %d", len(rows), prov, want)
	}
	for _, r := range rows {
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
}

// TestTCPBased: the providers whose fabric row gets tcp's connected
// endpoints as a second yardstick.
func TestTCPBased(t *testing.T) {
	for prov, want := range map[string]bool{"net": true, "tcp": true, "tcp;ofi_rxm": true, "net;ofi_rxm": true,
		"shm": false, "verbs;ofi_rxm": false, "udp;ofi_rxd": false, "tcpx": false} {
		if got := tcpBased(prov); got != want {
			t.Errorf("tcpBased(%q) = %v", prov, got)
		}
	}
}

// TestFabricRowInAnotherProcess: the fifo/fabric row runs its second end
// in a peer process, as fi_pingpong does, and measures there every size,
// the rendezvous sizes included, and its latency's tail.
func TestFabricRowInAnotherProcess(t *testing.T) {
	ts := fabricTransports(benchConfig(false))
	if len(ts) != 1 || ts[0].Proc == nil || ts[0].Pair != nil {
		t.Fatalf("the fabric row is not a two-process one: %+v", ts)
	}
	for _, size := range []int{56, 64 << 10, 1 << 20} {
		if lat, err := PingPong(ts[0], size, 5*time.Millisecond); err != nil || lat <= 0 {
			t.Fatalf("%d B: %v %v", size, lat, err)
		}
	}
	if mps, bps, err := Stream(ts[0], 1<<20, 5*time.Millisecond); err != nil || mps <= 0 || bps <= 0 {
		t.Fatalf("stream: %v %v %v", mps, bps, err)
	}
	p50, p99, err := LatencyPercentiles(ts[0], 56, 20*time.Millisecond)
	if err != nil || p50 <= 0 || p99 < p50 {
		t.Fatalf("percentiles: %v %v %v", p50, p99, err)
	}
	rows := []Row{{Transport: ts[0].Name, LatencyNs: map[int]float64{56: float64(p50)}}}
	fabricTail(rows, 5*time.Millisecond, func(string) {})
	if rows[0].Ratios[fabricP99] < 1 || rows[0].LatencyP99Ns[56] <= 0 {
		t.Fatalf("the row's tail: %+v", rows[0])
	}
	if rows[0].Ratios[fabricFloorP99] < 1 || rows[0].FloorP99Ns[56] < rows[0].FloorP50Ns[56] || rows[0].FloorP50Ns[56] <= 0 {
		t.Fatalf("the provider's floor beside the tail: %+v", rows[0])
	}
	var text bytes.Buffer
	Write(&text, rows, "text")
	for _, want := range []string{"99th percentile", "The provider's floor"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("the table does not print %q:\n%s", want, text.String())
		}
	}
}

// TestFabricFloor runs the provider's floor, the fabric provider's puts
// made in C, over the default provider and shm, and refuses what it cannot
// measure with an error rather than a crash or a time of zero.
func TestFabricFloor(t *testing.T) {
	prov, err := benchFabricProvider()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{prov, "shm"} {
		samples, err := fabricFloor(p, 56, 2000)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if len(samples) != 2000 {
			t.Fatalf("%s: %d samples for 2000 round trips", p, len(samples))
		}
		for i, s := range samples {
			if s <= 0 || s > 10*time.Second {
				t.Fatalf("%s: round trip %d took %v", p, i, s)
			}
		}
	}
	if _, err := fabricFloor("shm", 1<<20, 10); err == nil || !strings.Contains(err.Error(), "inject size") {
		t.Errorf("a size past the inject size: %v", err)
	}
	if _, err := fabricFloor("no such provider", 56, 10); err == nil || !strings.Contains(err.Error(), "fi_getinfo") {
		t.Errorf("an unknown provider: %v", err)
	}
	if _, err := fabricFloor("shm", 56, 0); err == nil {
		t.Error("no round trips: no error")
	}
}
