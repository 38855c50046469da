package refview

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
)

// Path is where a debug listener (runtime/observe) serves its members'
// snapshots as JSON.
const Path = "/debug/rrefs"

// maxDocBytes bounds a listener's answer: a member holding a hundred
// thousand references serves about 30 MB.
const maxDocBytes = 256 << 20

// URL is the address of a listener's snapshots: addr is host:port, or a
// URL (http://host:port, with or without the path).
func URL(addr string) string {
	u := strings.TrimSuffix(addr, "/")
	if !strings.Contains(u, "://") {
		u = "http://" + u
	}
	if !strings.HasSuffix(u, Path) {
		u += Path
	}
	return u
}

// Fetch reads the snapshots a debug listener at addr serves.
func Fetch(ctx context.Context, client *http.Client, addr string) (Doc, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, URL(addr), nil)
	if err != nil {
		return Doc{}, fmt.Errorf("refview: %s: %w", addr, err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return Doc{}, fmt.Errorf("refview: %s: %w", addr, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 200))
		return Doc{}, fmt.Errorf("refview: %s: %s: %s", URL(addr), resp.Status, strings.TrimSpace(string(b)))
	}
	var d Doc
	dec := json.NewDecoder(io.LimitReader(resp.Body, maxDocBytes))
	if err := dec.Decode(&d); err != nil {
		return Doc{}, fmt.Errorf("refview: %s: not a snapshot document: %w", URL(addr), err)
	}
	return d, nil
}

// FetchAll reads every listener's snapshots at once and merges them; a
// listener that does not answer is listed in Unreachable with why, and the
// error is the first such failure (nil when all answered).
func FetchAll(ctx context.Context, client *http.Client, addrs []string) (Doc, error) {
	docs := make([]Doc, len(addrs))
	errs := make([]error, len(addrs))
	var wg sync.WaitGroup
	for i, a := range addrs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			docs[i], errs[i] = Fetch(ctx, client, a)
		}()
	}
	wg.Wait()
	var first error
	for i, err := range errs {
		if err != nil {
			docs[i].Unreachable = append(docs[i].Unreachable, err.Error())
			if first == nil {
				first = err
			}
		}
	}
	return Merge(docs...), first
}
