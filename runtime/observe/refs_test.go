package observe_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image"
	"image/png"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/rrefkit/rref/internal/refview"
	"github.com/rrefkit/rref/runtime/observe"
	"github.com/rrefkit/rref/runtime/worker"
)

// sizes are how many values and references a known group makes: remotes
// from A to B (lent lends of them on to C), values C makes and lends to A,
// and values B makes and keeps.
type sizes struct{ remotes, lent, cValues, bValues int }

// knownGroup is three members, A, B and C, in this process, each with a
// debug listener (A's joins B's and C's on its page), holding exactly what
// sizes says, settled: every reference confirmed.
type knownGroup struct {
	ws    []*worker.Worker
	addrs []string
	first *worker.RRef[int] // A's reference to the first of B's values, lent to C
}

// bValueSize is the encoded size of each value B makes for itself.
const bValueSize = 1000

func startKnownGroup(t *testing.T, n sizes) *knownGroup {
	t.Helper()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	var mu sync.Mutex
	var kept []any // the references functions keep: alive until the test ends
	setup := func(w *worker.Worker) {
		worker.Register(w, "add", func(ctx context.Context, x [2]int) (int, error) { return x[0] + x[1], nil })
		worker.Register(w, "hold", func(ctx context.Context, r *worker.RRef[int]) (int, error) {
			mu.Lock()
			kept = append(kept, r.Keep())
			mu.Unlock()
			return 0, nil
		})
		worker.Register(w, "holdText", func(ctx context.Context, r *worker.RRef[string]) (int, error) {
			mu.Lock()
			kept = append(kept, r.Keep())
			mu.Unlock()
			return 0, nil
		})
	}
	ws, err := worker.NewGroup([]string{"A", "B", "C"}, worker.Config{Logger: quiet, Setup: setup, RecordRefSites: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	g := &knownGroup{ws: ws}
	t.Cleanup(func() {
		for _, w := range ws {
			w.Close()
		}
		mu.Lock()
		kept = nil
		mu.Unlock()
	})
	a, b, c := ws[0], ws[1], ws[2]
	var mine []any
	for i := range n.remotes {
		r, err := worker.Remote[int](ctx, a, "B", "add", [2]int{i, 1})
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			g.first = r
		}
		mine = append(mine, r)
		if i < n.lent {
			if _, err := worker.Call[int](ctx, a, "C", "hold", r); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i := range n.cValues {
		r, err := worker.NewRRef(c, fmt.Sprintf("text %d", i))
		if err != nil {
			t.Fatal(err)
		}
		mine = append(mine, r)
		if _, err := worker.Call[int](ctx, c, "A", "holdText", r); err != nil {
			t.Fatal(err)
		}
	}
	for range n.bValues {
		r, err := worker.NewRRef(b, make([]byte, bValueSize)) // the Fast codec stores bytes as they are
		if err != nil {
			t.Fatal(err)
		}
		mine = append(mine, r)
	}
	t.Cleanup(func() { mine = nil })
	if err := worker.SettleGroup(ctx, ws); err != nil {
		t.Fatal(err)
	}
	// B's and C's listeners, then A's, which joins theirs on its page.
	g.addrs = make([]string, len(ws))
	for i := len(ws) - 1; i >= 0; i-- {
		var opts []observe.Option
		if i == 0 {
			opts = append(opts, observe.Peers(g.addrs[1:]...))
		}
		addr, err := observe.Serve(context.Background(), ws[i], "127.0.0.1:0", opts...)
		if err != nil {
			t.Fatal(err)
		}
		g.addrs[i] = addr.String()
	}
	return g
}

func getDoc(t *testing.T, addr string) refview.Doc {
	t.Helper()
	resp, err := http.Get(refview.URL(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var d refview.Doc
	if err := json.NewDecoder(resp.Body).Decode(&d); err != nil {
		t.Fatal(err)
	}
	return d
}

// TestRefsJSONCountsAGroup: each member's listener serves its snapshot as
// JSON, and the counts of a group holding hundreds of references are
// exactly what it made: values by owner and type, forks by holder,
// references by holder, all confirmed once settled; joined, the group's.
func TestRefsJSONCountsAGroup(t *testing.T) {
	leaks := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, leaks) }) // after the group's cleanup: its listeners stop with it
	t.Cleanup(http.DefaultClient.CloseIdleConnections)
	n := sizes{remotes: 200, lent: 100, cValues: 60, bValues: 40}
	g := startKnownGroup(t, n)
	type want struct{ values, forks, program, refs int }
	for i, w := range map[string]want{
		"A": {0, 0, 0, n.remotes + n.cValues},
		"B": {n.remotes + n.bValues, n.remotes + n.lent, n.bValues, 0},
		"C": {n.cValues, n.cValues, n.cValues, n.lent},
	} {
		d := getDoc(t, g.addrs[map[string]int{"A": 0, "B": 1, "C": 2}[i]])
		if len(d.Members) != 1 || d.Members[0].Member != i {
			t.Fatalf("%s's listener serves %d members", i, len(d.Members))
		}
		s := d.Members[0]
		var got want
		got.values, got.refs = len(s.Values), len(s.References)
		for _, v := range s.Values {
			got.forks += len(v.Forks)
			got.program += v.Program
			if v.State != worker.ValueReady || v.Type == "" || v.Size <= 0 || v.Age <= 0 {
				t.Errorf("%s's value %+v", i, v)
			}
			if v.Type == "[]uint8" && v.Size != bValueSize {
				t.Errorf("%s's []byte value is %d bytes, want %d", i, v.Size, bValueSize)
			}
		}
		for _, r := range s.References {
			if r.State != worker.RefConfirmed || !r.Held || r.Type == "" || r.Age <= 0 {
				t.Errorf("%s's settled reference %+v", i, r)
			}
		}
		if got != w {
			t.Errorf("member %s: %+v, want %+v", i, got, w)
		}
	}
	d, err := refview.FetchAll(context.Background(), http.DefaultClient, g.addrs)
	if err != nil {
		t.Fatal(err)
	}
	c := refview.Join(d).Count()
	if c.Members != 3 || c.Values != n.remotes+n.bValues+n.cValues || c.References != n.remotes+n.cValues+n.lent ||
		c.ByState[worker.RefConfirmed] != c.References || c.Held != c.References || c.Lent != 0 {
		t.Fatalf("the group's counts: %+v", c)
	}
}

// TestRefsPage: the page answers each grouping and order, draws a value's
// tree, joins its peers' listeners (naming one that does not answer), and
// refuses a bad query or an unknown value with the reason.
func TestRefsPage(t *testing.T) {
	leaks := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, leaks) }) // after the group's cleanup: its listeners stop with it
	t.Cleanup(http.DefaultClient.CloseIdleConnections)
	g := startKnownGroup(t, sizes{remotes: 3, lent: 1, cValues: 2, bValues: 1})
	get := func(addr, query string) (int, string) {
		resp, err := http.Get("http://" + addr + observe.RefsViewPath + query)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	code, page := get(g.addrs[0], "")
	for _, want := range []string{"References of A, B, C", "3 members, 6 values owned, 6 references", "Member A", "Member B", "Member C", "refs_test.go:"} {
		if code != http.StatusOK || !strings.Contains(page, want) {
			t.Errorf("by member: %d, no %q", code, want)
		}
	}
	code, page = get(g.addrs[0], "?by=value&sort=size&type=uint8")
	if code != http.StatusOK || strings.Count(page, "<svg class=\"tree\"") != 1 || !strings.Contains(page, "[]uint8") {
		t.Errorf("by value, []byte values only: %d\n%s", code, page)
	}
	if code, page := get(g.addrs[0], "?by=owner"); code != http.StatusBadRequest || !strings.Contains(page, `by "owner": want member or value`) {
		t.Errorf("a bad grouping: %d %s", code, page)
	}
	if code, page := get(g.addrs[0], "?value=Z:1"); code != http.StatusNotFound || !strings.Contains(page, `no value "Z:1" among members A, B, C`) {
		t.Errorf("an unknown value: %d %s", code, page)
	}
	if _, err := observe.Serve(context.Background(), nil, "127.0.0.1:0"); err == nil || !strings.Contains(err.Error(), "no worker") {
		t.Errorf("Serve of no worker: %v", err)
	}
	// A listener whose peer is gone shows what it has, and names the peer.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gone := ln.Addr().String()
	ln.Close()
	addr, err := observe.Serve(context.Background(), g.ws[2], "127.0.0.1:0", observe.Peers(gone))
	if err != nil {
		t.Fatal(err)
	}
	if code, page := get(addr.String(), ""); code != http.StatusOK || !strings.Contains(page, "References of C") || !strings.Contains(page, "not reached: refview: "+gone) {
		t.Errorf("a peer that does not answer: %d %s", code, page)
	}
}

// TestRefsPageInChromium renders the page of a known group in a real
// browser: headless Chromium dumps the DOM after the page's script ran,
// which must hold the fork tree's nodes (the owner, and each fork), and
// takes a screenshot, which must be a PNG that is not blank. .ci/run
// installs chromium and sets RREF_REQUIRE_CHROMIUM, so there it runs.
func TestRefsPageInChromium(t *testing.T) {
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		if os.Getenv("RREF_REQUIRE_CHROMIUM") != "" {
			t.Fatal("RREF_REQUIRE_CHROMIUM is set but chromium is not installed: apt-get install -y chromium")
		}
		t.Skip("chromium is not installed (apt-get install -y chromium; .ci/run installs it and runs this test)")
	}
	defer http.DefaultClient.CloseIdleConnections()
	g := startKnownGroup(t, sizes{remotes: 2, lent: 1, cValues: 1, bValues: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	snapA, err := g.ws[0].Refs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	snapC, err := g.ws[2].Refs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var value, forkA, forkC string
	for _, r := range snapA.References {
		if r.Owner == "B" && len(snapC.References) > 0 && r.Fork == snapC.References[0].Parent {
			value, forkA, forkC = r.Value, r.Fork, snapC.References[0].Fork
		}
	}
	if value == "" {
		t.Fatalf("no value of B's held by A and lent to C: A %+v, C %+v", snapA.References, snapC.References)
	}
	page := "http://" + g.addrs[0] + observe.RefsViewPath + "?by=value&value=" + url.QueryEscape(value)
	dir := t.TempDir()
	browse := func(args ...string) []byte {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), chromiumTimeout)
		defer cancel()
		args = append([]string{"--headless", "--disable-gpu", "--no-sandbox", "--no-first-run", "--user-data-dir=" + filepath.Join(dir, "profile"),
			"--window-size=1200,900"}, append(args, page)...)
		var stdout, stderr bytes.Buffer
		cmd := exec.CommandContext(ctx, chromium, args...)
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("chromium %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
		}
		return stdout.Bytes()
	}
	dom := string(browse("--dump-dom"))
	if !regexp.MustCompile(`<html[^>]*class="js"`).MatchString(dom) {
		t.Errorf("the page's script did not run: %.300s", dom)
	}
	for _, node := range []struct{ kind, id, member string }{{"owner", value, "B"}, {"fork", forkA, "A"}, {"fork", forkC, "C"}} {
		re := regexp.MustCompile(`<g class="node ` + node.kind + `[^"]*" data-id="` + regexp.QuoteMeta(node.id) + `" data-member="` + node.member + `"`)
		if !re.MatchString(dom) {
			t.Errorf("no %s node %s of %s in the DOM:\n%s", node.kind, node.id, node.member, dom)
		}
	}
	shot := filepath.Join(dir, "page.png")
	browse("--screenshot=" + shot)
	f, err := os.Open(shot)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("the screenshot is no PNG: %v", err)
	}
	if colours, inked := inkOf(img); colours < minColours || inked < minInked {
		t.Fatalf("the screenshot looks blank: %d colours, %.2f%% of pixels off the background", colours, 100*inked)
	}
}

// chromiumTimeout bounds one run of the browser on a loaded host.
const chromiumTimeout = 90 * time.Second

// A page with text, tables and a tree has many colours (anti-aliased
// text alone has dozens) and covers a few percent of the window; a blank
// or failed render has one colour.
const (
	minColours = 16
	minInked   = 0.01
)

// inkOf counts an image's colours and the share of its pixels that differ
// from its top-left pixel, the background.
func inkOf(img image.Image) (colours int, inked float64) {
	b := img.Bounds()
	bg := img.At(b.Min.X, b.Min.Y)
	seen := map[[4]uint32]bool{}
	off := 0
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			c := img.At(x, y)
			r, g, bl, a := c.RGBA()
			seen[[4]uint32{r, g, bl, a}] = true
			if br, bgg, bb, ba := bg.RGBA(); r != br || g != bgg || bl != bb || a != ba {
				off++
			}
		}
	}
	return len(seen), float64(off) / float64(b.Dx()*b.Dy())
}
