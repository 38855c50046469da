package bench

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestTableMeasuresEveryCell runs the whole table with tiny durations: every
// transport must work and fill every cell. No timing is asserted.
func TestTableMeasuresEveryCell(t *testing.T) {
	if testing.Short() {
		t.Skip("measures transports")
	}
	rows := FIFOTable(2*time.Millisecond, func(string) {})
	if len(rows) != 2+len(Transports()) {
		t.Fatalf("%d rows", len(rows))
	}
	for _, r := range rows[2:] {
		if r.Err != "" {
			t.Errorf("%s: %s", r.Transport, r.Err)
		}
		if len(r.LatencyNs) != len(LatencySizes) || len(r.RateMps) != len(RateSizes) || len(r.Bandwidth) != len(BandwidthSizes) {
			t.Errorf("%s: missing cells: %+v", r.Transport, r)
		}
		for _, v := range r.LatencyNs {
			if v <= 0 {
				t.Errorf("%s: latency %v", r.Transport, v)
			}
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
