package core_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/rrefkit/rref/generated/rref"
	"github.com/rrefkit/rref/genrt"
	"github.com/rrefkit/rref/runtime/core"
)

// TestSharedLimitsWithStrings: genrt.Limits is a value one may share (one
// Limits for every connection). With Strings set it carries a pointer to a
// table, which DeliverFrame once copied into each core's decoder: two cores
// on two goroutines, handed one Limits, wrote one map (review). The race
// detector reports it if it comes back.
func TestSharedLimitsWithStrings(t *testing.T) {
	lim := genrt.DefaultLimits
	lim.Strings = &genrt.Interner{}
	var wg sync.WaitGroup
	for id := range 2 {
		c := core.New(core.WorkerID(id + 1))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 500 {
				f := rref.AppendFrame(nil, &rref.Call{CallID: uint64(i + 1), Function: fmt.Sprintf("fn%d-%d", id, i)})
				c.DeliverFrame(3, f, &lim)
				c.TakeReady()
			}
		}()
	}
	wg.Wait()
}
