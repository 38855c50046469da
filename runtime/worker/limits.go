package worker

import (
	"errors"
	"fmt"

	"github.com/rrefkit/rref/fifo"
	"github.com/rrefkit/rref/generated/rref"
	"github.com/rrefkit/rref/runtime/core"
)

// ErrTooLarge: a call's arguments, or a result or value, do not fit in one
// message of the transport (fifo.Config.MaxMessage). Only that call fails;
// the two workers stay connected.
var ErrTooLarge = errors.New("worker: message larger than the transport allows")

// Bounds on what a frame adds to a call's arguments, so that a call that
// would not fit is refused before the core mints anything for it (forks
// for its RRef arguments): a frame's version, code, ids and lengths take
// under frameSlack bytes, and one RRef description its four ids (at most 5
// and 15 bytes each as varints) and its type's name, which Go keeps short.
const (
	frameSlack   = 64
	descSlack    = 64
	maxTypeNames = 256
)

// fits refuses a call or Remote to another worker whose frame could exceed
// the transport's message limit.
func (w *Worker) fits(to core.WorkerID, fn string, args []byte, refs []core.HandleID, meta []rref.MetaEntry) error {
	if to == w.id {
		return nil // no transport between a worker and itself
	}
	bound := frameSlack + len(fn) + len(args) + len(refs)*(descSlack+maxTypeNames)
	for i := range meta {
		bound += rref.SizeMetaEntry(&meta[i])
	}
	if bound > w.maxMessage {
		name, _, _ := splitWireName(fn)
		return fmt.Errorf("%w: %d bytes of arguments to %s on %s, limit %d per message", ErrTooLarge, len(args), name, w.nameOf(to), w.maxMessage)
	}
	return nil
}

func maxMessageOf(cfg fifo.Config) int {
	if cfg.MaxMessage > 0 {
		return cfg.MaxMessage
	}
	return fifo.DefaultMaxMessage
}

// bulkOf is the length of the payload a message carries (a call's
// arguments, a result, a value), the part that can outgrow a message.
func bulkOf(m rref.Message) int {
	switch m := m.(type) {
	case *rref.CallRet:
		return len(m.Result)
	case *rref.FetchRet:
		return len(m.Value)
	case *rref.Call:
		return len(m.Args)
	case *rref.RemoteCall:
		return len(m.Args)
	}
	return 0
}

// oversize is the size of m's frame when its payload makes it exceed the
// transport's limit, else 0. The frame is measured, not built: a result
// of many megabytes must fail as soon as it is known, not after being
// copied into a frame only to be refused. Only a payload near the limit
// is measured at all; sendNow checks the frame it builds for the rest.
func (w *Worker) oversize(m rref.Message) int {
	if bulkOf(m)+frameSlack <= w.maxMessage {
		return 0
	}
	if n := rref.SizeFrame(m); n > w.maxMessage {
		return n
	}
	return 0
}

// refuseTooLarge answers a message that does not fit in the transport: the
// answer to a call or a fetch goes back as ErrTooLarge's kind, so that only
// that call fails, and fails as too large (no function is blamed: one ran
// and succeeded, or none ran, for a NewRRef's value); the connection, which
// would refuse it, is not touched. A request can only get here past fits,
// a bug, and is failed locally.
func (w *Worker) refuseTooLarge(m core.Envelope, size int) {
	why := fmt.Sprintf("a message of %d bytes to %s, limit %d per message", size, w.nameOf(m.To), w.maxMessage)
	w.cfg.Logger.Warn("rref message too large", "worker", w.name, "msg", m.Msg.MessageCode(), "err", fmt.Errorf("%w: %s", ErrTooLarge, why))
	switch msg := m.Msg.(type) {
	case *rref.CallRet:
		w.sendNow(core.Envelope{From: m.From, To: m.To, Msg: &rref.CallRet{CallID: msg.CallID, Error: rref.ErrorKindTooLarge, Message: "its result needs " + why, RRefs: msg.RRefs}})
	case *rref.FetchRet:
		w.sendNow(core.Envelope{From: m.From, To: m.To, Msg: &rref.FetchRet{FetchID: msg.FetchID, RRef: msg.RRef, Error: rref.ErrorKindTooLarge, Message: "the value needs " + why, Confirms: msg.Confirms}})
	case *rref.Call:
		w.cfg.Logger.Error("rref call passed the size check and did not fit", "worker", w.name, "err", why)
		w.apply(func(c *core.Core) {
			c.Deliver(m.To, &rref.CallRet{CallID: msg.CallID, Error: rref.ErrorKindTooLarge, Message: "its arguments need " + why})
		})
	default:
		w.cfg.Logger.Error("rref message dropped: it does not fit in the transport", "worker", w.name, "msg", m.Msg.MessageCode(), "err", why)
	}
}
