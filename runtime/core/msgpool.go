package core

import "github.com/rrefkit/rref/generated/rref"

// msgFree recycles the sent messages of one type: a caller that passes back
// each Ready with TakeReadyInto hands the core back the messages in it, and
// the core's next messages of that type reuse them instead of allocating.
type msgFree[T any] struct{ free []*T }

// fill returns v in a recycled message, or in a new one.
func (f *msgFree[T]) fill(v T) *T {
	var p *T
	if n := len(f.free); n > 0 {
		p = f.free[n-1]
		f.free = f.free[:n-1]
	} else {
		p = new(T) // not &v: that would move v to the heap on every call
	}
	*p = v
	return p
}

func (f *msgFree[T]) put(p *T) {
	if len(f.free) < maxFreeMsgs {
		var zero T
		*p = zero // drop references to arguments and values for the collector
		f.free = append(f.free, p)
	}
}

const maxFreeMsgs = 64

// msgPools are the free lists of the messages the core sends.
type msgPools struct {
	call        msgFree[rref.Call]
	callRet     msgFree[rref.CallRet]
	remoteCall  msgFree[rref.RemoteCall]
	remoteRet   msgFree[rref.RemoteRet]
	fetchCall   msgFree[rref.FetchCall]
	fetchRet    msgFree[rref.FetchRet]
	userDelete  msgFree[rref.UserDelete]
	childAccept msgFree[rref.ChildAccept]
	forkRequest msgFree[rref.ForkRequest]
	forkAck     msgFree[rref.ForkAck]
}

// reclaim takes back a message the caller has sent and keeps no more.
func (p *msgPools) reclaim(m rref.Message) {
	switch m := m.(type) {
	case *rref.Call:
		p.call.put(m)
	case *rref.CallRet:
		p.callRet.put(m)
	case *rref.RemoteCall:
		p.remoteCall.put(m)
	case *rref.RemoteRet:
		p.remoteRet.put(m)
	case *rref.FetchCall:
		p.fetchCall.put(m)
	case *rref.FetchRet:
		p.fetchRet.put(m)
	case *rref.UserDelete:
		p.userDelete.put(m)
	case *rref.ChildAccept:
		p.childAccept.put(m)
	case *rref.ForkRequest:
		p.forkRequest.put(m)
	case *rref.ForkAck:
		p.forkAck.put(m)
	}
}

// noPools stands for the free lists of a core that has taken nothing back:
// filled from, never put into (fill only takes from a list, and an empty
// one takes nothing), so a core whose caller never hands messages back (an
// explorer's clones) makes no lists at all.
var noPools msgPools

// pools is the core's free lists of sent messages, to take from.
func (c *Core) pools() *msgPools {
	if c.msgs == nil {
		return &noPools
	}
	return c.msgs
}

// poolsW is the core's free lists, to put into: made on first use.
func (c *Core) poolsW() *msgPools {
	if c.msgs == nil {
		c.msgs = &msgPools{}
	}
	return c.msgs
}
