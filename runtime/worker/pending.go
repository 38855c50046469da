package worker

import (
	"sync"
	"time"

	"github.com/rrefkit/rref/runtime/core"
)

// callDone is a call's result as handed to its caller. frame, when not
// nil, is the pooled buffer the result's bytes lie in, which the caller
// gives back (putWireBuf) once it has decoded them.
type callDone struct {
	core.CallResult
	frame *[]byte
}

// fetchDone is a fetch's result as handed to its fetcher, with the pooled
// buffer its value lies in, as callDone.
type fetchDone struct {
	core.FetchResult
	frame *[]byte
}

// waiting tracks the calls (or fetches) awaiting their result: the channel
// each result goes to, and a default deadline for those whose context had
// none. The worker's lock guards it.
type waiting[T any] struct {
	ch  map[uint64]chan T
	due map[uint64]time.Time
}

func newWaiting[T any]() waiting[T] {
	return waiting[T]{ch: map[uint64]chan T{}, due: map[uint64]time.Time{}}
}

// add registers id; a zero due means the caller's context bounds the wait.
func (p *waiting[T]) add(id uint64, ch chan T, due time.Time) {
	p.ch[id] = ch
	if !due.IsZero() {
		p.due[id] = due
	}
}

// take removes id and returns its channel, or nil when it is not waiting.
func (p *waiting[T]) take(id uint64) chan T {
	ch := p.ch[id]
	delete(p.ch, id)
	delete(p.due, id)
	return ch
}

// overdue removes and returns the channels whose deadline is before now.
func (p *waiting[T]) overdue(now time.Time) []chan T {
	var out []chan T
	for id, due := range p.due {
		if now.After(due) {
			out = append(out, p.take(id))
		}
	}
	return out
}

// drain removes and returns every entry.
func (p *waiting[T]) drain() map[uint64]chan T {
	all := p.ch
	*p = newWaiting[T]()
	return all
}

func (p *waiting[T]) len() int { return len(p.ch) }

// chanPool recycles the one-slot channels results are handed over on. Once
// await has returned, the channel is empty and no one else holds it: whoever
// takes an id from a waiting set sends on its channel exactly once, and
// await takes that send even when its context ends first.
type chanPool[T any] struct{ p sync.Pool }

func (c *chanPool[T]) get() chan T {
	if ch, ok := c.p.Get().(chan T); ok {
		return ch
	}
	return make(chan T, 1)
}

func (c *chanPool[T]) put(ch chan T) { c.p.Put(ch) }

var (
	callChans  chanPool[callDone]
	fetchChans chanPool[fetchDone]
)
