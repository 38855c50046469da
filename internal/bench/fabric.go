package bench

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/rrefkit/rref/fifo"
	"github.com/rrefkit/rref/internal/freeport"
)

// fabricTransports is the fifo/fabric row, in a build with the libfabric
// provider (-tags rreffabric): its second end in another process, as
// fi_pingpong's, over the provider RREF_FABRIC_PROVIDER names, or fifo's
// default choice.
func fabricTransports(cfg fifo.Config) []Transport {
	provs, err := fifo.FabricProviders()
	if err != nil || len(provs) == 0 {
		return nil
	}
	prov := os.Getenv("RREF_FABRIC_PROVIDER") // "": the provider's default choice
	name := "fifo/fabric"
	if prov != "" {
		name += " " + prov
	}
	return []Transport{{Name: name, Proc: procFabric(cfg, prov), SendInPlace: true}}
}

// fiPingpong is libfabric's own ping-pong (libfabric-bin), the fabric row's
// yardstick: it runs as two processes, server and client, over the
// provider the fifo/fabric row uses.
const fiPingpong = "fi_pingpong"

// fiPingpongIters is how many round trips fi_pingpong makes at each size
// for a cell of d = fiPingpongCell: at its tens of microseconds a round
// trip, about a tenth of a second each.
var fiPingpongIters = map[int]int{8: 2000, 56: 2000, 256: 2000, 4 << 10: 1500, 64 << 10: 400, 1 << 20: 60}

const fiPingpongCell = 200 * time.Millisecond

// fiPingpongRow measures fi_pingpong at every latency size, when the build
// has the fabric provider and fi_pingpong is installed: nil otherwise. Its
// first row runs reliable-datagram endpoints over the fabric row's
// provider (-e rdm); over a tcp-based provider a second runs tcp's own
// connected endpoints (-p tcp -e msg), the least libfabric's tcp pays.
func fiPingpongRow(d time.Duration, progress func(string)) []Row {
	prov, err := benchFabricProvider()
	if err != nil {
		return nil
	}
	if _, err := exec.LookPath(fiPingpong); err != nil || prov == "" {
		return nil
	}
	rows := []Row{measureFiPingpong(fiPingpong+" "+prov, prov, "rdm", d, progress)}
	if tcpBased(prov) {
		rows = append(rows, measureFiPingpong(fiPingpong+" tcp"+fiPingpongMsg, "tcp", "msg", d, progress))
	}
	return rows
}

// benchFabricProvider is the provider the fabric rows run over:
// RREF_FABRIC_PROVIDER, or fifo's default choice.
func benchFabricProvider() (string, error) {
	prov, err := fifo.DefaultFabricProvider() // fails in a build without the provider
	if p := os.Getenv("RREF_FABRIC_PROVIDER"); p != "" && err == nil {
		prov = p
	}
	return prov, err
}

// fiPingpongMsg ends the name of the row of tcp's connected endpoints.
const fiPingpongMsg = " -e msg"

// tcpBased reports whether provider runs over libfabric's tcp: net (1.17's
// tcp datagram provider), tcp, or a utility provider over either.
func tcpBased(provider string) bool {
	core, _, _ := strings.Cut(provider, ";")
	return core == "net" || core == "tcp"
}

// measureFiPingpong runs fi_pingpong over prov with endpoints of type ep
// at every latency size, into a row named name.
func measureFiPingpong(name, prov, ep string, d time.Duration, progress func(string)) Row {
	r := Row{Transport: name, LatencyNs: map[int]float64{}, Bandwidth: map[int]float64{}}
	scale := max(1, int(d/fiPingpongCell))
	for _, size := range LatencySizes {
		progress(fmt.Sprintf("%s %s", r.Transport, sizeName(size)))
		usec, mbps, err := runFiPingpong(prov, ep, size, fiPingpongIters[size]*scale)
		if err != nil {
			r.Err = err.Error()
			break
		}
		r.LatencyNs[size] = usec * 1e3
		if size == 1<<20 {
			r.Bandwidth[size] = mbps * 1e6
		}
	}
	return r
}

// runFiPingpong runs one fi_pingpong pair on loopback and returns its
// one-way latency (its usec/xfer: the run's time over twice its
// iterations) and bandwidth (MB/s, 10^6 bytes).
func runFiPingpong(prov, ep string, size, iters int) (usec, mbps float64, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), fiPingpongTimeout)
	defer cancel()
	port, err := freePort()
	if err != nil {
		return 0, 0, err
	}
	args := []string{"-p", prov, "-e", ep, "-I", strconv.Itoa(iters), "-S", strconv.Itoa(size)}
	server := exec.CommandContext(ctx, fiPingpong, append(args, "-B", port)...)
	var serverOut bytes.Buffer
	server.Stdout, server.Stderr = &serverOut, &serverOut
	if err := server.Start(); err != nil {
		return 0, 0, err
	}
	defer server.Wait()
	defer server.Process.Kill()
	// The server needs a moment to listen on its control port; a client
	// that came too early fails at once and tries again.
	var out []byte
	for try := 0; ; try++ {
		time.Sleep(fiPingpongStartup)
		out, err = exec.CommandContext(ctx, fiPingpong, append(args, "-P", port, "127.0.0.1")...).CombinedOutput()
		if err == nil || try == fiPingpongTries || ctx.Err() != nil {
			break
		}
	}
	if err != nil {
		return 0, 0, fmt.Errorf("%s -p %s -e %s at %d B: %v: %s", fiPingpong, prov, ep, size, err, lastLine(out))
	}
	return parseFiPingpong(out)
}

const (
	fiPingpongTimeout = 30 * time.Second
	fiPingpongStartup = 100 * time.Millisecond
	fiPingpongTries   = 20
)

// parseFiPingpong reads the result line that follows fi_pingpong's header
// ("bytes #sent #ack total time MB/sec usec/xfer Mxfers/sec").
func parseFiPingpong(out []byte) (usec, mbps float64, err error) {
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	for i, l := range lines {
		h := strings.Fields(l)
		if len(h) < 7 || h[0] != "bytes" || h[5] != "MB/sec" || h[6] != "usec/xfer" || i+1 >= len(lines) {
			continue
		}
		f := strings.Fields(lines[i+1])
		if len(f) < 7 {
			break
		}
		mbps, err1 := strconv.ParseFloat(f[5], 64)
		usec, err2 := strconv.ParseFloat(f[6], 64)
		if err1 != nil || err2 != nil || usec <= 0 {
			break
		}
		return usec, mbps, nil
	}
	return 0, 0, fmt.Errorf("%s: no result line in %q", fiPingpong, lastLine(out))
}

func lastLine(b []byte) string {
	s := strings.TrimSpace(string(b))
	return s[strings.LastIndexByte(s, '\n')+1:]
}

func freePort() (string, error) {
	ports, err := freeport.Ports(1)
	if err != nil {
		return "", err
	}
	return ports[0], nil
}
