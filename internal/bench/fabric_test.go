package bench

import (
	"strings"
	"testing"
)

// fiPingpongOutput is what libfabric 1.17's fi_pingpong prints.
const fiPingpongOutput = `bytes   #sent   #ack     total       time     MB/sec    usec/xfer   Mxfers/sec
56      2k      =2k      218k        0.12s      1.93      29.03       0.03
`

func TestParseFiPingpong(t *testing.T) {
	usec, mbps, err := parseFiPingpong([]byte(fiPingpongOutput))
	if err != nil || usec != 29.03 || mbps != 1.93 {
		t.Fatalf("%v %v %v", usec, mbps, err)
	}
	for name, out := range map[string]string{
		"empty":           "",
		"header only":     strings.SplitN(fiPingpongOutput, "\n", 2)[0],
		"an error":        "fi_getinfo(): common/shared.c:1054, ret=-61 (No data available)",
		"short result":    strings.Replace(fiPingpongOutput, "29.03       0.03", "", 1),
		"not a number":    strings.Replace(fiPingpongOutput, "29.03", "fast", 1),
		"zero latency":    strings.Replace(fiPingpongOutput, "29.03", "0.00", 1),
		"columns swapped": strings.Replace(fiPingpongOutput, "MB/sec    usec/xfer", "usec/xfer MB/sec", 1),
	} {
		if _, _, err := parseFiPingpong([]byte(out)); err == nil {
			t.Errorf("%s: accepted %q", name, out)
		}
	}
}

func FuzzParseFiPingpong(f *testing.F) {
	f.Add([]byte(fiPingpongOutput))
	f.Add([]byte("bytes #sent #ack total time MB/sec usec/xfer\n1 2 3 4 5 6 7"))
	f.Fuzz(func(t *testing.T, out []byte) {
		usec, _, err := parseFiPingpong(out)
		if err == nil && !(usec > 0) {
			t.Fatalf("accepted a latency of %v", usec)
		}
	})
}

// TestFabricAgainstFiPingpong: the fabric row's ratios are its cells over
// fi_pingpong's, and appear only when both rows were measured.
func TestFabricAgainstFiPingpong(t *testing.T) {
	rows := []Row{
		{Transport: "fifo/fabric", LatencyNs: map[int]float64{56: 30e3, 4 << 10: 40e3, 1 << 20: 900e3}, Bandwidth: map[int]float64{1 << 20: 1e9}},
		{Transport: "fi_pingpong net", LatencyNs: map[int]float64{56: 20e3, 4 << 10: 40e3, 1 << 20: 1800e3}, Bandwidth: map[int]float64{1 << 20: 0.5e9}},
	}
	fabricAgainstFiPingpong(rows)
	want := map[string]float64{fabricLat56: 1.5, fabricLat4K: 1, fabricLat1M: 0.5, fabricBW1M: 2}
	for k, v := range want {
		if got := rows[0].Ratios[k]; got != v {
			t.Errorf("%s = %v, want %v", k, got, v)
		}
	}
	if len(rows[0].Ratios) != len(want) {
		t.Errorf("ratios %v: the connected endpoints' appear without their row", rows[0].Ratios)
	}
	alone := []Row{rows[0]}
	alone[0].Ratios = nil
	if fabricAgainstFiPingpong(alone); alone[0].Ratios != nil {
		t.Errorf("ratios without an fi_pingpong row: %v", alone[0].Ratios)
	}
	// Over a tcp-based provider, tcp's connected endpoints are a second
	// yardstick, whose ratios carry their own names.
	withMsg := []Row{{Transport: "fifo/fabric tcp;ofi_rxm", LatencyNs: rows[0].LatencyNs, Bandwidth: rows[0].Bandwidth}, rows[1],
		{Transport: "fi_pingpong tcp" + fiPingpongMsg, LatencyNs: map[int]float64{56: 10e3, 4 << 10: 20e3, 1 << 20: 300e3}, Bandwidth: map[int]float64{1 << 20: 4e9}}}
	withMsg[0].Ratios = nil
	fabricAgainstFiPingpong(withMsg)
	for k, v := range map[string]float64{fabricLat56: 1.5, fabricLat56 + fabricMsg: 3, fabricLat4K + fabricMsg: 2, fabricLat1M + fabricMsg: 3, fabricBW1M + fabricMsg: 0.25} {
		if got := withMsg[0].Ratios[k]; got != v {
			t.Errorf("with the -e msg row: %s = %v, want %v", k, got, v)
		}
	}
}
