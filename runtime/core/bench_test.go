package core_test

import (
	"runtime"
	"testing"

	"github.com/rrefkit/rref/generated/rref"
	"github.com/rrefkit/rref/runtime/core"
)

// BenchmarkForkCycle measures the cost of handled messages in the hardest
// flow (seed flow 4): A passes its RRef to C, C asks owner B, B confirms, C
// accepts and runs, returns, and releases. Six messages per cycle.
func BenchmarkForkCycle(b *testing.B) {
	a, c, o := core.New(1), core.New(3), core.New(2)
	h, _ := a.Remote(2, "identity", []byte("v"), nil)
	rc := a.TakeReady().Messages[0].Msg.(*rref.RemoteCall)
	o.Deliver(1, rc)
	o.CompleteRemote(rc.RRef, rc.Args, core.Failure{})
	a.Deliver(2, o.TakeReady().Messages[0].Msg)
	a.TakeReady()
	cores := map[core.WorkerID]*core.Core{1: a, 2: o, 3: c}
	var queue []core.Envelope
	collect := func(x *core.Core) {
		r := x.TakeReady()
		queue = append(queue, r.Messages...)
		for _, run := range r.Runs {
			x.Return(run.From, run.CallID, nil, nil, core.Failure{})
			for _, hh := range run.Handles {
				x.Release(hh)
			}
			queue = append(queue, x.TakeReady().Messages...)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	msgs := 0
	for i := 0; i < b.N; i++ {
		a.Call(3, "f", nil, []core.HandleID{h})
		collect(a)
		for len(queue) > 0 {
			e := queue[0]
			queue = queue[1:]
			cores[e.To].Deliver(e.From, e.Msg)
			msgs++
			collect(cores[e.To])
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(msgs), "ns/msg")
	b.ReportMetric(float64(msgs)/float64(b.N), "msgs/op")
}

// BenchmarkMillionForks holds one million live forks on one owner, reports the
// owner's bytes per fork, then deletes them all: fork plus delete throughput.
func BenchmarkMillionForks(b *testing.B) {
	const forks = 1_000_000
	for i := 0; i < b.N; i++ {
		o := core.New(2)
		h := o.NewLocal([]byte("v"))
		id := o.Handle(h).RRef
		parent := rref.ForkID{Worker: 1, Local: 1}
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for f := uint64(0); f < forks; f++ {
			o.Deliver(3, &rref.ForkRequest{RRef: id, Fork: rref.ForkID{Worker: 1, Local: f + 10}, Parent: parent})
			o.TakeReady()
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/forks, "bytes/fork")
		if n := o.Counters().Forks; n != forks {
			b.Fatalf("%d forks", n)
		}
		for f := uint64(0); f < forks; f++ {
			o.Deliver(3, &rref.UserDelete{RRef: id, Fork: rref.ForkID{Worker: 1, Local: f + 10}})
			o.TakeReady()
		}
		if n := o.Counters().Forks; n != 0 {
			b.Fatalf("%d forks left", n)
		}
		runtime.KeepAlive(o)
	}
	b.ReportMetric(float64(2*forks*b.N)/b.Elapsed().Seconds(), "fork+delete-msgs/s")
}
