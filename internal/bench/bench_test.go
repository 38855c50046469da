package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if ServeChild() {
		return
	}
	goleak.VerifyTestMain(m)
}

// TestTableMeasuresEveryCell runs the whole table with tiny durations: every
// transport must work and fill every cell. No timing is asserted.
func TestTableMeasuresEveryCell(t *testing.T) {
	if testing.Short() {
		t.Skip("measures transports")
	}
	rows := FIFOTable(2*time.Millisecond, func(string) {})
	peers := len(fiPingpongRow(0, func(string) {})) // libfabric's fi_pingpong, in a fabric build that has it
	if len(rows) != 3+len(Transports())+peers {
		t.Fatalf("%d rows", len(rows))
	}
	for _, r := range []Row{rows[0], rows[1]} { // the floors, measured between two processes
		if r.Err != "" || r.LatencyNs[56] <= 0 {
			t.Errorf("%s: %+v", r.Transport, r)
		}
	}
	if rows[1].RateMps[56] <= 0 {
		t.Errorf("the ring floor has no stream rate: %+v", rows[1])
	}
	if _, ok := rows[1].Ratios["latency56_over_floor"]; !ok {
		t.Errorf("the ring floor has no ratio to the cache-line floor: %+v", rows[1])
	}
	for _, r := range rows[3:] {
		if r.Err != "" {
			t.Errorf("%s: %s", r.Transport, r.Err)
		}
		if strings.HasPrefix(r.Transport, fiPingpong) {
			// libfabric's own ping-pong measures latency at every size and
			// bandwidth at 1 MiB, and no rate: a yardstick, not a row of ours.
			if len(r.LatencyNs) != len(LatencySizes) || r.Bandwidth[1<<20] <= 0 {
				t.Errorf("%s: missing cells: %+v", r.Transport, r)
			}
			continue
		}
		if len(r.LatencyNs) != len(LatencySizes) || len(r.RateMps) != len(RateSizes) || len(r.Bandwidth) != len(BandwidthSizes) {
			t.Errorf("%s: missing cells: %+v", r.Transport, r)
		}
		for _, v := range r.LatencyNs {
			if v <= 0 {
				t.Errorf("%s: latency %v", r.Transport, v)
			}
		}
		if _, ok := r.Ratios["rate56_over_stream_floor"]; !ok {
			t.Errorf("%s: no ratio to the stream floor", r.Transport)
		}
		if _, ok := r.Ratios["latency56_over_ring_floor"]; !ok {
			t.Errorf("%s: no ratio to the ring floor", r.Transport)
		}
		if _, ok := r.Ratios["unix_latency56_over_this"]; !ok {
			t.Errorf("%s: no ratio to Unix sockets", r.Transport)
		}
	}
	var text, csv, js bytes.Buffer
	Write(&text, rows, "text")
	Write(&csv, rows, "csv")
	Write(&js, rows, "json")
	if !strings.Contains(text.String(), "fifo/shm") || !strings.Contains(text.String(), "lat56/floor") {
		t.Errorf("text table:\n%s", text.String())
	}
	if n := strings.Count(csv.String(), "\n"); n != len(rows)+1 {
		t.Errorf("csv has %d lines", n)
	}
	var back []Row
	if err := json.Unmarshal(js.Bytes(), &back); err != nil || len(back) != len(rows) {
		t.Errorf("json: %v", err)
	}
}

// TestRPCTableMeasuresEveryCell runs every RPC system briefly, the
// two-process one included (this test binary serves as its server): each
// must answer and fill its cells. No timing is asserted.
func TestRPCTableMeasuresEveryCell(t *testing.T) {
	if testing.Short() {
		t.Skip("measures RPC systems")
	}
	rows := RPCTable(5*time.Millisecond, func(string) {})
	if len(rows) != len(RPCSystems()) {
		t.Fatalf("%d rows for %d systems", len(rows), len(RPCSystems()))
	}
	for _, r := range rows {
		if r.Err != "" || r.RoundTripNs <= 0 || r.Calls16PerSec <= 0 {
			t.Errorf("%s: %+v", r.System, r)
		}
		if strings.HasPrefix(r.System, "rrefkit") && (r.RemoteToHereNs <= 0 || r.RemoteToHereSitesNs <= 0 || r.Ratios["sites_over_remote_to_here"] <= 0) {
			t.Errorf("%s: no Remote + ToHere measured with reference sites off and on: %+v", r.System, r)
		}
		if runtime.GOOS == "linux" && (r.CPU1Ns <= 0 || r.CPU16Ns <= 0) {
			t.Errorf("%s: no processor time per call: %+v", r.System, r)
		}
		if _, measured := yardstickFor(r.System); measured && (r.YardstickNs <= 0 || r.Ratios["yardstick_round_trip"]+r.Ratios["tcp_yardstick_round_trip"] <= 0) {
			t.Errorf("%s: no yardstick beside it: %+v", r.System, r)
		}
	}
	var text bytes.Buffer
	WriteRPC(&text, rows, "text")
	for _, want := range []string{"shm, 2 procs", "gRPC rt / rt", "cpu us/call 16", "rt / yardstick", "targets (ratios in this run):",
		"rrefkit tcp round trip / raw TCP ping-pong", "sites on / off", "Remote + ToHere, reference sites on / off"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("no %q in the text table:\n%s", want, text.String())
		}
	}
}

// TestRPCCellsMeasureOnlyThose: a table narrowed to cells (-cells) leaves
// the others empty, and claims no ratio that reads an empty cell: a 16-caller
// rate of 0 over a 1-caller one is not a target missed.
func TestRPCCellsMeasureOnlyThose(t *testing.T) {
	if testing.Short() {
		t.Skip("measures RPC systems")
	}
	rows := RPCTableOf(5*time.Millisecond, func(string) {}, RPCOptions{
		Only:  func(name string) bool { return name == "rrefkit (mem)" || name == "net/rpc (tcp)" },
		Cells: map[string]bool{"1": true},
	})
	if len(rows) != 2 {
		t.Fatalf("%d rows, want 2: %+v", len(rows), rows)
	}
	for _, r := range rows {
		if r.Err != "" || r.RoundTripNs <= 0 || r.Calls16PerSec != 0 || r.CPU16Ns != 0 || r.RemoteToHereNs != 0 {
			t.Errorf("%s: measured other cells than the round trip: %+v", r.System, r)
		}
		for _, k := range []string{"calls16_over_calls1", "calls16_over_netrpc", "remote_to_here_over_round_trip"} {
			if v, ok := r.Ratios[k]; ok {
				t.Errorf("%s: ratio %s = %v from an unmeasured cell", r.System, k, v)
			}
		}
	}
}

// TestProcStatCPU reads utime and stime past a command name with spaces
// and parentheses, and refuses a line it cannot read rather than
// reporting a time of zero.
func TestProcStatCPU(t *testing.T) {
	line := "4242 (a (b) c) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 17 0 0 20 0 3 0 100 0 0"
	if got, err := parseProcStatCPU(line); err != nil || got != 2670*time.Millisecond {
		t.Errorf("parseProcStatCPU = %v, %v; want 2.67s", got, err)
	}
	for _, bad := range []string{"", "4242 comm S 1", "4242 (x) S 1 2 3", "4242 (x) S 1 4242 4242 0 -1 4194560 100 0 0 0 abc 17"} {
		if got, err := parseProcStatCPU(bad); err == nil {
			t.Errorf("parseProcStatCPU(%q) = %v, want an error", bad, got)
		}
	}
	if runtime.GOOS == "linux" {
		self, err := procCPU(os.Getpid())
		if err != nil {
			t.Fatal(err)
		}
		rusage, err := selfCPU()
		if err != nil {
			t.Fatal(err)
		}
		// The same process's time, read two ways: /proc to the hundredth.
		if d := rusage - self; d < -50*time.Millisecond || d > 50*time.Millisecond {
			t.Errorf("/proc says %v, getrusage %v", self, rusage)
		}
	}
}

// BenchmarkRPC measures one caller's round trip on each RPC system, the
// two-process shm one included: go test -bench RPC ./internal/bench.
func BenchmarkRPC(b *testing.B) {
	for _, mk := range RPCSystems() {
		s, err := mk.make()
		if err != nil {
			b.Fatal(err)
		}
		b.Run(strings.NewReplacer(" ", "", "(", "", ")", "", ",", "-").Replace(s.name), func(b *testing.B) {
			ctx := context.Background()
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				if v, err := s.call(ctx, int64(i), 1); err != nil || v != int64(i)+1 {
					b.Fatal(v, err)
				}
			}
		})
		s.close()
	}
}

// TestSystemNamesMatchWhatTheyMake: a table narrowed by name (-only) picks
// systems by the names they are listed under, which must be the names
// they report.
func TestSystemNamesMatchWhatTheyMake(t *testing.T) {
	for _, mk := range RPCSystems() {
		if strings.Contains(mk.name, "2 procs") {
			continue // starts a process: its name is checked by the table test
		}
		s, err := mk.make()
		if err != nil {
			t.Fatal(err)
		}
		if s.name != mk.name {
			t.Errorf("listed as %q, made as %q", mk.name, s.name)
		}
		s.close()
	}
}

// TestRemoteTargetReadsEveryTransport: the Remote + ToHere target holds on
// each transport, so the worst of them is printed, mem's included (it was
// once left out, where the ratio was highest).
func TestRemoteTargetReadsEveryTransport(t *testing.T) {
	rows := []RPCRow{
		{System: "rrefkit (shm, 2 procs)", RoundTripNs: 10, RemoteToHereNs: 15},
		{System: "rrefkit (tcp)", RoundTripNs: 10, RemoteToHereNs: 18},
		{System: "rrefkit (mem)", RoundTripNs: 10, RemoteToHereNs: 25},
	}
	addRatios(rows)
	var out bytes.Buffer
	writeTargets(&out, rows)
	if !strings.Contains(out.String(), "Remote + ToHere / Call round trip (worst transport)                2.50  (target <= 2: NOT met)") {
		t.Fatalf("the Remote + ToHere target does not read mem's row:\n%s", out.String())
	}
}
