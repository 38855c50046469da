package core_test

import (
	"runtime"
	"testing"

	"github.com/rrefkit/rref/generated/rref"
	"github.com/rrefkit/rref/runtime/core"
)

// steady drives cores as a worker does: every message is encoded into a
// frame and decoded by its receiver (DeliverFrame), each core's Ready is
// passed back with TakeReadyInto once acted on, and frames reuse buffers.
// What it measures is what the core itself costs per message in steady
// state, allocations included.
type steady struct {
	cores   map[core.WorkerID]*core.Core
	readies map[core.WorkerID]*core.Ready
	frames  [][]byte // in flight, in order, from head on
	from    []core.WorkerID
	to      []core.WorkerID
	head    int
	spare   [][]byte
	msgs    int
	onRun   func(c *core.Core, run core.Run)
}

func newSteady(ids ...core.WorkerID) *steady {
	s := &steady{cores: map[core.WorkerID]*core.Core{}, readies: map[core.WorkerID]*core.Ready{}}
	for _, id := range ids {
		// Few tombstones: the memories of freed values and deleted forks
		// grow until full, and a steady state is reached once they are.
		s.cores[id] = core.New(id, core.WithTombstones(steadyTombstones))
		s.readies[id] = &core.Ready{}
	}
	return s
}

// collect takes what id's core produced: its messages become frames, its
// runs go to onRun, and its Ready goes back to the core.
func (s *steady) collect(id core.WorkerID) {
	c, rd := s.cores[id], s.readies[id]
	c.TakeReadyInto(rd)
	for _, e := range rd.Messages {
		var buf []byte
		if n := len(s.spare); n > 0 {
			buf, s.spare = s.spare[n-1][:0], s.spare[:n-1]
		}
		s.frames = append(s.frames, rref.AppendFrame(buf, e.Msg))
		s.from, s.to = append(s.from, e.From), append(s.to, e.To)
	}
	runs := rd.Runs
	for _, run := range runs {
		s.onRun(c, run)
	}
	if len(runs) > 0 {
		s.collect(id)
	}
}

// drain delivers every frame in flight, in order, and what they cause.
func (s *steady) drain() {
	for s.head < len(s.frames) {
		f, from, to := s.frames[s.head], s.from[s.head], s.to[s.head]
		s.head++
		s.cores[to].DeliverFrame(from, f, nil)
		s.spare = append(s.spare, f)
		s.msgs++
		s.collect(to)
	}
	s.frames, s.from, s.to, s.head = s.frames[:0], s.from[:0], s.to[:0], 0
}

// runAndRelease completes a Remote with its argument as its value, and
// answers a Call with nothing, releasing the RRefs it was passed.
func runAndRelease(c *core.Core, run core.Run) {
	if run.Kind == core.RunRemote {
		c.CompleteRemote(run.RRef, run.Args, core.Failure{})
		return
	}
	c.Return(run.From, run.CallID, nil, nil, core.Failure{})
	for _, h := range run.Handles {
		c.Release(h)
	}
}

// steadyTombstones is small enough for a few hundred cycles to fill the
// bounded memories.
const steadyTombstones = 64

// BenchmarkSteadyCall is a Call with no RRef argument and its CallRet, in
// steady state: two messages a call. The target: no allocation.
func BenchmarkSteadyCall(b *testing.B) {
	s := newSteady(1, 2)
	s.onRun = func(c *core.Core, run core.Run) { c.Return(run.From, run.CallID, run.Args, nil, core.Failure{}) }
	args := []byte("args")
	for range 100 { // warm the pools and maps
		s.cores[1].Call(2, "f", args, nil)
		s.collect(1)
		s.drain()
	}
	b.ReportAllocs()
	s.msgs = 0
	for b.Loop() {
		s.cores[1].Call(2, "f", args, nil)
		s.collect(1)
		s.drain()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(s.msgs), "ns/msg")
}

// BenchmarkSteadyForkCycle is seed flow 4 in steady state: A passes its
// RRef to C, C asks owner B to fork it, B confirms, C accepts and runs,
// returns, and releases; six messages a cycle, four of them control
// messages.
func BenchmarkSteadyForkCycle(b *testing.B) {
	s := newSteady(1, 2, 3)
	a, o := s.cores[1], s.cores[2]
	s.onRun = runAndRelease
	h, _ := a.Remote(2, "identity", []byte("v"), nil)
	s.collect(1)
	s.drain()
	if !a.Handle(h).Confirmed || o.Counters().Owners != 1 {
		b.Fatal("the RRef was not created")
	}
	cycle := func() {
		a.Call(3, "f", nil, []core.HandleID{h})
		s.collect(1)
		s.drain()
	}
	for range 100 {
		cycle()
	}
	b.ReportAllocs()
	s.msgs = 0
	for b.Loop() {
		cycle()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(s.msgs), "ns/msg")
	b.ReportMetric(float64(s.msgs)/float64(b.N), "msgs/op")
}

// heapObjects is how many heap objects the process has allocated so far.
// runtime.ReadMemStats stops the world and flushes every processor's
// cache, so it counts each allocation, tiny ones (a short string) included;
// runtime/metrics' allocs:objects counts small ones only when a cache is
// refilled and tiny ones never, and read around one message sees zero.
func heapObjects() uint64 {
	runtime.ReadMemStats(&memStats)
	return memStats.Mallocs
}

var memStats runtime.MemStats

// TestSteadyControlMessagesAllocateNothing runs the fork cycle and a plain
// call in steady state and counts, per message type, the allocations of
// its receiver handling it (decode, the core's step, the Ready passed back
// and the answers framed). The target: control messages (no string
// or list field) allocate nothing, and neither does either side of a call
// with no RRef argument.
func TestSteadyControlMessagesAllocateNothing(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("counts allocations")
	}
	s := newSteady(1, 2, 3)
	a := s.cores[1]
	s.onRun = runAndRelease
	h, _ := a.Remote(2, "identity", []byte("v"), nil)
	s.collect(1)
	s.drain()
	args := []byte("x")
	type bucket struct {
		code  rref.Code // 0: the caller's core issuing the call
		plain bool      // of a call with no RRef argument
	}
	counted := map[bucket]uint64{}
	seen := map[bucket]int{}
	round := func(count, plain bool) {
		before := heapObjects()
		if plain {
			a.Call(2, "greet", args, nil) // a name of more than one byte: Go allocates those
		} else {
			a.Call(3, "forward", nil, []core.HandleID{h}) // the fork cycle: four control messages
		}
		s.collect(1)
		if count {
			counted[bucket{0, plain}] += heapObjects() - before
			seen[bucket{0, plain}]++
		}
		for s.head < len(s.frames) {
			f, from, to := s.frames[s.head], s.from[s.head], s.to[s.head]
			s.head++
			b := bucket{rref.Code(f[1]), plain}
			before := heapObjects()
			s.cores[to].DeliverFrame(from, f, nil)
			s.collect(to)
			if count {
				counted[b] += heapObjects() - before
				seen[b]++
			}
			s.spare = append(s.spare, f)
		}
		s.frames, s.from, s.to, s.head = s.frames[:0], s.from[:0], s.to[:0], 0
	}
	for i := range 400 {
		round(false, i%2 == 0)
	}
	for i := range 200 {
		round(true, i%2 == 0)
	}
	control := map[rref.Code]bool{rref.CodeForkRequest: true, rref.CodeForkAck: true, rref.CodeChildAccept: true, rref.CodeUserDelete: true}
	for b, n := range seen {
		per := float64(counted[b]) / float64(n)
		what := b.code.String()
		if b.code == 0 {
			what = "(issuing)"
		}
		t.Logf("%-12s plain call %-5v %4d handled, %.2f allocations each", what, b.plain, n, per)
		if (control[b.code] || b.plain) && per > 0 {
			t.Errorf("%v (plain call: %v) allocates %.2f times each in steady state", b.code, b.plain, per)
		}
	}
	for code := range control {
		if seen[bucket{code, false}] == 0 {
			t.Errorf("the cycle never sent %v: the test no longer measures it", code)
		}
	}
}

// BenchmarkControlMessage is an owner handling control messages in steady
// state: a ForkRequest for a new fork (answered with a ForkAck) and the
// fork's UserDelete, each framed and decoded as a transport would; two
// messages an iteration. The target: 100 ns and no allocation
// per message. With a memory of 64 deleted forks it fits in the cache;
// with the default memory, full (65536 forks, tables of megabytes), each
// delete evicts the oldest fork and each request looks a new one up at a
// random place in it, which measured 1.3-1.6 times as long.
func BenchmarkControlMessage(b *testing.B) {
	b.Run("memory=64", func(b *testing.B) { benchControlMessage(b, steadyTombstones) })
	b.Run("memory=default", func(b *testing.B) { benchControlMessage(b, core.DefaultTombstones) })
}

func benchControlMessage(b *testing.B, tombstones int) {
	o := core.New(2, core.WithTombstones(tombstones))
	h := o.NewLocal([]byte("v"))
	id := o.Handle(h).RRef
	// Worker 1 holds a fork (parent) and passed a child of it to worker 3,
	// which asks the owner for it and later deletes it. Fork ids are random
	// 64-bit values, as a worker mints them (newID), not a count: a table
	// or filter that favours ids in sequence must not look faster here
	// than it is. mintLike(n) is distinct for each n and never 0.
	parent := rref.ForkID{Worker: 1, Local: mintLike(1)}
	var rd core.Ready
	frame := make([]byte, 0, 64)
	next := uint64(1)
	req, del := &rref.ForkRequest{RRef: id, Parent: parent}, &rref.UserDelete{RRef: id}
	step := func() {
		fork := rref.ForkID{Worker: 1, Local: mintLike(next + 1)}
		next++
		req.Fork, del.Fork = fork, fork
		frame = rref.AppendFrame(frame[:0], req)
		o.DeliverFrame(3, frame, nil)
		o.TakeReadyInto(&rd)
		frame = rref.AppendFrame(frame[:0], del)
		o.DeliverFrame(3, frame, nil)
		o.TakeReadyInto(&rd)
	}
	for range 4 * tombstones {
		step()
	}
	if n := o.Counters().Forks; n != 0 {
		b.Fatalf("%d forks left: the cycle does not return to its start", n)
	}
	if len(rd.Errors) > 0 || len(rd.Messages) != 0 {
		b.Fatalf("the owner refused the cycle: %v", rd.Errors)
	}
	b.ReportAllocs()
	for b.Loop() {
		step()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(2*b.N), "ns/msg")
}

var sink any

// mintLike spreads n over 64 bits as a worker's random ids are: splitmix64's
// finish, a bijection, so distinct counts give distinct ids, and only 0
// gives 0.
func mintLike(n uint64) uint64 {
	n = (n ^ n>>30) * 0xbf58476d1ce4e5b9
	n = (n ^ n>>27) * 0x94d049bb133111eb
	return n ^ n>>31
}

// TestHeapObjectsSeesEachAllocation checks the instrument the test above
// reads around each message: one allocation, small or tiny, is one more.
func TestHeapObjectsSeesEachAllocation(t *testing.T) {
	if raceEnabled {
		t.Skip("counts allocations")
	}
	name := []byte("g")
	for i := range 100 {
		before := heapObjects()
		if i%2 == 0 {
			sink = new([4]*int) // small
		} else {
			sink = string(name) // tiny: its bytes, with no pointer (boxing a string costs one more)
		}
		if n := heapObjects() - before; n < 1 {
			t.Fatalf("round %d: an allocation counted as %d", i, n)
		}
	}
}

// TestSteadyPlainCallAllocatesNothing measures a whole call with no RRef
// argument, both sides, with testing.AllocsPerRun.
func TestSteadyPlainCallAllocatesNothing(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("counts allocations")
	}
	s := newSteady(1, 2)
	s.onRun = func(c *core.Core, run core.Run) { c.Return(run.From, run.CallID, run.Args, nil, core.Failure{}) }
	args := []byte("x")
	round := func() {
		s.cores[1].Call(2, "greet", args, nil)
		s.collect(1)
		s.drain()
	}
	for range 400 {
		round()
	}
	if n := testing.AllocsPerRun(400, round); n != 0 {
		t.Errorf("a call with no RRef argument allocates %.2f times in steady state", n)
	}
}
