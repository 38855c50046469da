package explore

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

// churn is a model with few, small states whose steps allocate garbage, as
// any model's Clone and Step do (World clones cores, encodes messages).
type churn struct {
	at    int
	limit int
}

var sink []byte

func (c *churn) Choices() []int {
	if c.at >= c.limit {
		return nil
	}
	return []int{0}
}
func (c *churn) Step(int) {
	sink = make([]byte, 256<<10) // garbage at once
	c.at++
}
func (c *churn) Clone() *churn               { n := *c; return &n }
func (c *churn) AppendState(b []byte) []byte { return fmt.Appendf(b, "%d", c.at) }
func (c *churn) Violation() *Violation       { return nil }
func (c *churn) CheckEnd()                   {}
func (c *churn) Describe(int) string         { return "step" }
func (c *churn) ChoiceKey(int) string        { return "step" }

// MaxMemory bounds the live heap: garbage does not count. Under the GC
// target rrefgen conformance sets while it searches (400), the heap grows
// to five times the live heap before a collection; a search whose live
// heap is a fraction of the bound must not stop (it once did: the bound
// read the heap's objects, dead ones included).
func TestMemoryBoundIgnoresGarbage(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(400))
	ballast := make([]byte, 24<<20) // 24 MiB live, held through the search
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	live := ms.HeapAlloc
	const bound = 64 << 20
	r := Explore(func() *churn { return &churn{limit: 4000} }, Options{MaxMemory: bound, Workers: 1})
	runtime.KeepAlive(ballast)
	runtime.GC()
	runtime.ReadMemStats(&ms)
	t.Logf("live heap before %d MiB, after %d MiB; bound %d MiB; truncated %q", live>>20, ms.HeapAlloc>>20, bound>>20, r.Truncated)
	if strings.Contains(r.Truncated, "memory bound") {
		t.Errorf("a search whose live heap is ~%d MiB stopped at the %d MiB live-heap bound: %q", live>>20, bound>>20, r.Truncated)
	}
}
