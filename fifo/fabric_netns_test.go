//go:build rreffabric && cgo && linux

package fifo

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestFabricAcrossNetworkNamespaces runs the fabric provider between two
// network namespaces joined by a veth pair, as between two hosts: nothing
// goes over loopback, and each endpoint binds its own side's address. The
// peer process runs in a namespace of its own and echoes every size,
// rendezvous included. It needs root (CI runs as root) and iproute2.
func TestFabricAcrossNetworkNamespaces(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("making network namespaces needs root")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("no ip (iproute2)")
	}
	if fabricProvider == fabricSHM {
		t.Skip("libfabric's shm provider works within one host, not across a network")
	}
	// Names and a /30 of their own per process, so that concurrent test
	// binaries do not meet; interface names fit IFNAMSIZ (15).
	id := os.Getpid() % 16000
	ns := fmt.Sprintf("rreffab%d", id)
	here, there := fmt.Sprintf("rfa%d", id), fmt.Sprintf("rfb%d", id)
	net3 := fmt.Sprintf("10.%d.%d", 200+id/4000, (id%4000)/16)
	host := id % 16 * 4
	hereIP, thereIP := fmt.Sprintf("%s.%d", net3, host+1), fmt.Sprintf("%s.%d", net3, host+2)
	ip := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	ip("netns", "add", ns)
	t.Cleanup(func() { exec.Command("ip", "netns", "del", ns).Run() }) // takes its end of the pair along
	ip("link", "add", here, "type", "veth", "peer", "name", there)
	t.Cleanup(func() { exec.Command("ip", "link", "del", here).Run() })
	ip("link", "set", there, "netns", ns)
	ip("addr", "add", hereIP+"/30", "dev", here)
	ip("link", "set", here, "up")
	ip("netns", "exec", ns, "ip", "addr", "add", thereIP+"/30", "dev", there)
	ip("netns", "exec", ns, "ip", "link", "set", there, "up")
	ip("netns", "exec", ns, "ip", "link", "set", "lo", "up")

	// The peer's namespace has no route but the pair: it reaches this
	// listener, and this end's endpoint, through the veth only.
	ln, err := net.Listen("tcp", hereIP+":0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cmd := exec.Command("ip", "netns", "exec", ns, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "RREF_FABRIC_PEER="+ln.Addr().String()+",echo", "RREF_FABRIC_NODE="+thereIP)
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := AcceptFabric(ctx, ln, secret, Config{Cells: 256}, WithProvider(fabricProvider), WithFabricNode(hereIP))
	if err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatal(err)
	}
	sizes := []int{0, 1, 56, 57, 1000, 5000, 100_000, 1 << 20, 7}
	echoThroughPeer(t, c, cmd, sizes)
	// The echoes came back through the pair, not some other way.
	total := 0
	for _, n := range sizes {
		total += n
	}
	raw, err := os.ReadFile("/sys/class/net/" + here + "/statistics/rx_bytes")
	if err != nil {
		t.Fatal(err)
	}
	if rx, _ := strconv.Atoi(strings.TrimSpace(string(raw))); rx < total {
		t.Errorf("%s received %d bytes, fewer than the %d echoed", here, rx, total)
	}
}
