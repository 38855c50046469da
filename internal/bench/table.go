package bench

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Sizes measured, as the fifo issue asks.
var (
	LatencySizes   = []int{8, 56, 256, 4 << 10, 64 << 10, 1 << 20}
	RateSizes      = []int{8, 56}
	BandwidthSizes = []int{64 << 10, 1 << 20, 4 << 20}
)

// Row is one transport's measurements; a missing cell is NaN-free: absent from the maps.
type Row struct {
	Transport string          `json:"transport"`
	LatencyNs map[int]float64 `json:"one_way_latency_ns,omitempty"`
	// LatencyP50Ns and LatencyP99Ns are percentiles of the one-way latency,
	// each round trip timed, where a row measures them (fifo/fabric at 56 B).
	LatencyP50Ns map[int]float64 `json:"one_way_latency_p50_ns,omitempty"`
	LatencyP99Ns map[int]float64 `json:"one_way_latency_p99_ns,omitempty"`
	// FloorP50Ns and FloorP99Ns are the same percentiles of the fabric
	// floor (fabricFloor) over the row's provider, beside the fifo/fabric row.
	FloorP50Ns map[int]float64    `json:"floor_one_way_latency_p50_ns,omitempty"`
	FloorP99Ns map[int]float64    `json:"floor_one_way_latency_p99_ns,omitempty"`
	RateMps    map[int]float64    `json:"messages_per_second,omitempty"`
	Bandwidth  map[int]float64    `json:"bytes_per_second,omitempty"`
	Ratios     map[string]float64 `json:"ratios,omitempty"`
	Err        string             `json:"error,omitempty"`
}

// FIFOTable measures every transport, the floors (a cache line, two rings
// of lines, and a stream through a ring, between two processes) and memcpy,
// each cell for about d, and fills in the ratios: latency at 56 B over the
// floors, the 56-byte rate over the stream floor, Unix sockets' latency over
// this row's, bandwidth at 1 MiB over memcpy's.
//
// The host moves virtual cores around between minutes, and the floor moves
// with them (5x here, between a placement where two vCPUs share a core
// complex and one where they do not), so each row's 56-byte latency is
// measured in rounds alternating with the floor, and its ratio compares the
// best of each: a ratio never pairs a latency with a floor from another
// placement.
func FIFOTable(d time.Duration, progress func(string)) []Row {
	// The cache-line floor row shows the best floor measured beside any row;
	// the ring floor's is the first.
	var floor time.Duration
	pairedFloor := map[string]floors{}
	noteFloor := func(name string, fl floors) {
		if fl.line <= 0 {
			return // not measured (the row failed): it must not erase the best floor seen
		}
		pairedFloor[name] = fl
		if floor == 0 || fl.line < floor {
			floor = fl.line
		}
	}
	floorRow := Row{Transport: "cache-line floor", LatencyNs: map[int]float64{}}
	ringRow := Row{Transport: "ring floor", LatencyNs: map[int]float64{}}
	progress("ring floor")
	if lat, fl, err := pairedWithFloors(RingFloor, d, false); err != nil {
		floorRow.Err, ringRow.Err = err.Error(), err.Error()
	} else {
		ringRow.LatencyNs[56] = float64(lat.Nanoseconds())
		noteFloor(ringRow.Transport, fl)
	}
	progress("stream floor")
	if rate, err := StreamFloor(d); err != nil {
		ringRow.Err = err.Error()
	} else {
		ringRow.RateMps = map[int]float64{56: rate}
	}
	rows := []Row{floorRow, ringRow}
	mc := Row{Transport: "memcpy", Bandwidth: map[int]float64{}}
	for _, s := range BandwidthSizes {
		mc.Bandwidth[s] = Memcpy(s, d)
	}
	rows = append(rows, mc)
	for _, t := range Transports() {
		rows = append(rows, measureRow(t, d, progress, func(fl floors) { noteFloor(t.Name, fl) }))
	}
	rows = append(rows, fiPingpongRow(d, progress)...) // none without the fabric provider and libfabric-bin
	fabricAgainstFiPingpong(rows)
	fabricTail(rows, d, progress)
	if floor > 0 {
		rows[0].LatencyNs[56] = float64(floor.Nanoseconds()) // the best seen in the run
	}
	var unix float64
	for _, r := range rows {
		if r.Transport == "unix socket" {
			unix = r.LatencyNs[56]
		}
	}
	for i := range rows {
		r := &rows[i]
		if r.Ratios == nil {
			r.Ratios = map[string]float64{}
		}
		if l, ok := r.LatencyNs[56]; ok && l > 0 && floor > 0 {
			fl, paired := pairedFloor[r.Transport]
			if !paired {
				fl.line = floor
			}
			r.Ratios["latency56_over_floor"] = l / float64(fl.line.Nanoseconds())
			if fl.ring > 0 {
				r.Ratios["latency56_over_ring_floor"] = l / float64(fl.ring.Nanoseconds())
			}
			if unix > 0 {
				r.Ratios["unix_latency56_over_this"] = unix / l
			}
		}
		if b, ok := r.Bandwidth[1<<20]; ok && mc.Bandwidth[1<<20] > 0 {
			r.Ratios["bandwidth1M_over_memcpy"] = b / mc.Bandwidth[1<<20]
		}
	}
	return rows
}

// latencyRounds is how many times a row's 56-byte latency and the floor
// alternate.
const latencyRounds = 3

// measureRow measures every cell of t's row, on one rig, and hands the
// floors measured alongside its 56-byte latency to paired.
func measureRow(t Transport, d time.Duration, progress func(string), paired func(floors)) Row {
	r := Row{Transport: t.Name, LatencyNs: map[int]float64{}, RateMps: map[int]float64{}, Bandwidth: map[int]float64{}}
	fail := func(err error) {
		if r.Err == "" {
			r.Err = err.Error()
		}
	}
	rg, err := t.open()
	if err != nil {
		fail(err)
		return r
	}
	defer func() {
		if err := rg.close(); err != nil {
			fail(err)
		}
	}()
	for _, s := range LatencySizes {
		progress(fmt.Sprintf("%s latency %d B", t.Name, s))
		var lat time.Duration
		var err error
		if s == 56 {
			var fl floors
			measure := func(d time.Duration) (time.Duration, error) { return rg.pingPong(s, d) }
			if lat, fl, err = pairedWithFloors(measure, d, true); err == nil {
				paired(fl)
			}
		} else {
			lat, err = rg.pingPong(s, d)
		}
		if err != nil {
			fail(err)
			continue
		}
		r.LatencyNs[s] = float64(lat.Nanoseconds())
	}
	for _, s := range RateSizes {
		progress(fmt.Sprintf("%s rate %d B", t.Name, s))
		var floor float64
		if s == 56 {
			// The stream floor just before, in the same placement.
			f, err := StreamFloor(d / 2)
			if err != nil {
				fail(err)
			}
			floor = f
		}
		mps, _, err := rg.stream(s, d)
		if err != nil {
			fail(err)
			continue
		}
		r.RateMps[s] = mps
		if floor > 0 {
			r.Ratios = map[string]float64{"rate56_over_stream_floor": mps / floor}
		}
	}
	for _, s := range BandwidthSizes {
		progress(fmt.Sprintf("%s bandwidth %d B", t.Name, s))
		_, bps, err := rg.stream(s, d)
		if err != nil {
			fail(err)
			continue
		}
		r.Bandwidth[s] = bps
	}
	return r
}

// floors are the floors measured alongside one latency: the cache line's and
// (when asked) the two rings'.
type floors struct{ line, ring time.Duration }

// pairedWithFloors runs measure (a one-way latency) alternately with the
// cache-line floor, and the ring floor if withRing, for about d each in
// all, and returns the best of each.
func pairedWithFloors(measure func(time.Duration) (time.Duration, error), d time.Duration, withRing bool) (lat time.Duration, fl floors, err error) {
	best := func(cur *time.Duration, v time.Duration) {
		if *cur == 0 || v < *cur {
			*cur = v
		}
	}
	for i := 0; i < latencyRounds; i++ {
		f, err := CacheLineFloor(d / latencyRounds)
		if err != nil {
			return 0, floors{}, err
		}
		best(&fl.line, f)
		if withRing {
			f, err := RingFloor(d / latencyRounds)
			if err != nil {
				return 0, floors{}, err
			}
			best(&fl.ring, f)
		}
		l, err := measure(d / latencyRounds)
		if err != nil {
			return 0, floors{}, err
		}
		best(&lat, l)
	}
	return lat, fl, nil
}

func sizeName(s int) string {
	switch {
	case s >= 1<<20:
		return strconv.Itoa(s>>20) + "MiB"
	case s >= 1<<10:
		return strconv.Itoa(s>>10) + "KiB"
	}
	return strconv.Itoa(s) + "B"
}

func cell(m map[int]float64, k int, scale float64, prec int) string {
	v, ok := m[k]
	if !ok {
		return "-"
	}
	return strconv.FormatFloat(v/scale, 'f', prec, 64)
}

func ratio(r Row, k string) string {
	v, ok := r.Ratios[k]
	if !ok {
		return "-"
	}
	return strconv.FormatFloat(v, 'f', 2, 64) + "x"
}

// header and values lay out one table row.
func header() []string {
	h := []string{"transport"}
	for _, s := range LatencySizes {
		h = append(h, "lat "+sizeName(s)+" us")
	}
	for _, s := range RateSizes {
		h = append(h, "rate "+sizeName(s)+" M/s")
	}
	for _, s := range BandwidthSizes {
		h = append(h, "bw "+sizeName(s)+" GB/s")
	}
	return append(h, "lat56/floor", "lat56/ring", "rate56/floor", "unix/lat56", "bw1M/memcpy")
}

func values(r Row) []string {
	v := []string{r.Transport}
	for _, s := range LatencySizes {
		v = append(v, cell(r.LatencyNs, s, 1e3, 2))
	}
	for _, s := range RateSizes {
		v = append(v, cell(r.RateMps, s, 1e6, 2))
	}
	for _, s := range BandwidthSizes {
		v = append(v, cell(r.Bandwidth, s, 1e9, 2))
	}
	return append(v, ratio(r, "latency56_over_floor"), ratio(r, "latency56_over_ring_floor"), ratio(r, "rate56_over_stream_floor"), ratio(r, "unix_latency56_over_this"), ratio(r, "bandwidth1M_over_memcpy"))
}

// Write prints rows as text, csv or json.
func Write(w io.Writer, rows []Row, format string) error {
	var table [][]string
	for _, r := range rows {
		table = append(table, values(r))
	}
	return writeTable(w, header(), table, format, rows, func() {
		for _, r := range rows {
			if r.Err != "" {
				fmt.Fprintf(w, "%s: %s\n", r.Transport, r.Err)
			}
		}
		fmt.Fprintln(w, "\nlat: one-way latency (ping-pong / 2); rate: one-way messages per second; bw: one-way bandwidth")
		fmt.Fprintln(w, "(from 64 KiB fifo rows receive with RecvFunc, in place, and the fabric row sends with SendFunc, writing a")
		fmt.Fprintln(w, "sequence number into each message where the peer's RMA read takes it, as fi_pingpong moves its registered")
		fmt.Fprintln(w, "buffers; the other fifo rows send with Send, whose copy is their transfer; the peers copy).")
		fmt.Fprintln(w, "Floors, between two processes: cache-line floor bounces one line; ring floor writes each message in the next")
		fmt.Fprintln(w, "line of a 4096-line ring of its own, polled by the other: the least any two-ring transport pays (its rate:")
		fmt.Fprintln(w, "one side writing lines as fast as the other polls them, the stream floor). fifo/shm and fifo/fabric rows")
		fmt.Fprintln(w, "run their second end in another process, as fi_pingpong does; the others run in one.")
		fmt.Fprintln(w, "Ratios compare rows of this run only: lat56/floor and lat56/ring against the floors measured alternately")
		fmt.Fprintln(w, "with the row's 56-byte latency (best of 3 rounds each; the floor row shows the run's best), unix/lat56 is Unix")
		fmt.Fprintln(w, "sockets' 56-byte latency over the row's (above 1 is faster), rate56/floor the row's 56-byte rate over the")
		fmt.Fprintln(w, "stream floor measured just before it, bw1M/memcpy against memcpy at 1 MiB.")
		for _, r := range rows {
			if r.Ratios[fabricLat56] > 0 {
				fmt.Fprintf(w, "%s against libfabric's own fi_pingpong (two processes, same provider, this run): latency %s at 56 B,\n", r.Transport, ratio(r, fabricLat56))
				fmt.Fprintf(w, "%s at 4 KiB, %s at 1 MiB; bandwidth at 1 MiB %s (streamed, over fi_pingpong's ping-pong).\n",
					ratio(r, fabricLat4K), ratio(r, fabricLat1M), ratio(r, fabricBW1M))
			}
			if r.Ratios[fabricLat56+fabricMsg] > 0 {
				fmt.Fprintf(w, "%s against fi_pingpong over tcp's own connected endpoints (-p tcp -e msg, this run): latency %s at 56 B,\n", r.Transport, ratio(r, fabricLat56+fabricMsg))
				fmt.Fprintf(w, "%s at 4 KiB, %s at 1 MiB; bandwidth at 1 MiB %s.\n",
					ratio(r, fabricLat4K+fabricMsg), ratio(r, fabricLat1M+fabricMsg), ratio(r, fabricBW1M+fabricMsg))
			}
			if r.Ratios[fabricP99] > 0 {
				fmt.Fprintf(w, "%s one-way latency at 56 B, each round trip timed: median %.2f us, 99th percentile %.2f us (%s the median).\n",
					r.Transport, r.LatencyP50Ns[56]/1e3, r.LatencyP99Ns[56]/1e3, ratio(r, fabricP99))
				if r.Ratios[fabricFloorP99] > 0 {
					fmt.Fprintf(w, "The provider's floor, the same puts made in C by two threads of one process with no Go runtime between:\n")
					fmt.Fprintf(w, "median %.2f us, 99th percentile %.2f us (%s the median): a tail above the floor's is the Go side's.\n",
						r.FloorP50Ns[56]/1e3, r.FloorP99Ns[56]/1e3, ratio(r, fabricFloorP99))
				}
			}
		}
	})
}

// writeTable prints a table as aligned text (then footer), csv, or the
// json encoding of raw.
func writeTable(w io.Writer, h []string, table [][]string, format string, raw any, footer func()) error {
	switch format {
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(raw)
	case "csv":
		cw := csv.NewWriter(w)
		cw.Write(h)
		for _, r := range table {
			cw.Write(r)
		}
		cw.Flush()
		return cw.Error()
	}
	all := append([][]string{h}, table...)
	widths := make([]int, len(h))
	for _, row := range all {
		for i, c := range row {
			widths[i] = max(widths[i], len(c))
		}
	}
	for _, row := range all {
		var b strings.Builder
		for i, c := range row {
			if i == 0 {
				fmt.Fprintf(&b, "%-*s", widths[i], c)
			} else {
				fmt.Fprintf(&b, "  %*s", widths[i], c)
			}
		}
		fmt.Fprintln(w, b.String())
	}
	footer()
	return nil
}

// The fabric row's ratios to fi_pingpong's, and over a tcp-based provider
// to fi_pingpong's over tcp's connected endpoints (suffix fabricMsg).
const (
	fabricLat56 = "latency56_over_fi_pingpong"
	fabricLat4K = "latency4K_over_fi_pingpong"
	fabricLat1M = "latency1M_over_fi_pingpong"
	fabricBW1M  = "bandwidth1M_over_fi_pingpong"
	fabricP99   = "latency56_p99_over_median"
	// fabricFloorP99 is the same ratio for the fabric floor in C.
	fabricFloorP99 = "floor_latency56_p99_over_median"
	fabricMsg      = "_msg"
)

// fabricFloorPercentiles measures the fabric floor (fabricFloor) over the
// fifo/fabric row's provider for about d and returns the median and 99th
// percentile of its one-way latency.
func fabricFloorPercentiles(size int, d time.Duration) (p50, p99 time.Duration, err error) {
	prov, err := benchFabricProvider()
	if err != nil {
		return 0, 0, err
	}
	// A round trip takes a few microseconds over shm and tens over tcp:
	// a first short run says how many fill d.
	probe, err := fabricFloor(prov, size, floorProbe)
	if err != nil {
		return 0, 0, err
	}
	var sum time.Duration
	for _, s := range probe {
		sum += 2 * s
	}
	iters := int(min(int64(d)*int64(floorProbe)/max(int64(sum), 1), maxSamples))
	samples, err := fabricFloor(prov, size, max(iters, floorProbe))
	if err != nil {
		return 0, 0, err
	}
	slices.Sort(samples)
	return samples[len(samples)/2], samples[len(samples)*99/100], nil
}

// floorProbe is the round trips of the fabric floor's first, sizing run.
const floorProbe = 1000

// fabricTail measures the fifo/fabric row's 56-byte latency distribution
// and keeps its 99th percentile over its median (the issue bounds it at 10).
func fabricTail(rows []Row, d time.Duration, progress func(string)) {
	for _, t := range fabricTransports(benchConfig(false)) {
		for i := range rows {
			if rows[i].Transport != t.Name || rows[i].Err != "" {
				continue
			}
			progress(t.Name + " latency percentiles 56 B")
			p50, p99, err := LatencyPercentiles(t, 56, d)
			if err != nil {
				rows[i].Err = err.Error()
				continue
			}
			if rows[i].Ratios == nil {
				rows[i].Ratios = map[string]float64{}
			}
			rows[i].Ratios[fabricP99] = float64(p99) / float64(p50)
			rows[i].LatencyP50Ns = map[int]float64{56: float64(p50.Nanoseconds())}
			rows[i].LatencyP99Ns = map[int]float64{56: float64(p99.Nanoseconds())}
			progress(t.Name + " libfabric floor in C, 56 B")
			if p50, p99, err := fabricFloorPercentiles(56, d); err == nil {
				rows[i].Ratios[fabricFloorP99] = float64(p99) / float64(p50)
				rows[i].FloorP50Ns = map[int]float64{56: float64(p50.Nanoseconds())}
				rows[i].FloorP99Ns = map[int]float64{56: float64(p99.Nanoseconds())}
			}
		}
	}
}

// fabricAgainstFiPingpong fills in the fifo/fabric row's ratios to the
// fi_pingpong rows', when both were measured.
func fabricAgainstFiPingpong(rows []Row) {
	var fab, fi, msg *Row
	for i := range rows {
		switch t := rows[i].Transport; {
		case strings.HasPrefix(t, "fifo/fabric"):
			fab = &rows[i]
		case strings.HasPrefix(t, fiPingpong) && strings.HasSuffix(t, fiPingpongMsg):
			msg = &rows[i]
		case strings.HasPrefix(t, fiPingpong):
			fi = &rows[i]
		}
	}
	if fab == nil {
		return
	}
	for _, y := range []struct {
		row    *Row
		suffix string
	}{{fi, ""}, {msg, fabricMsg}} {
		if y.row == nil {
			continue
		}
		if fab.Ratios == nil {
			fab.Ratios = map[string]float64{}
		}
		for key, size := range map[string]int{fabricLat56: 56, fabricLat4K: 4 << 10, fabricLat1M: 1 << 20} {
			if a, b := fab.LatencyNs[size], y.row.LatencyNs[size]; a > 0 && b > 0 {
				fab.Ratios[key+y.suffix] = a / b
			}
		}
		if a, b := fab.Bandwidth[1<<20], y.row.Bandwidth[1<<20]; a > 0 && b > 0 {
			fab.Ratios[fabricBW1M+y.suffix] = a / b
		}
	}
}
