package worker

import (
	"sync"
	"unsafe"

	"github.com/rrefkit/rref/runtime/core"
)

// A call's encoded argument, and a function's encoded result, are built in
// a buffer reused from call to call when nothing keeps the bytes once the
// message is sent: the transport copies a frame as it sends it. Bytes stay
// kept, and their buffer is left to the collector, when the message goes
// to this worker itself (the core hands them to the function or caller
// here), when jitter holds it back to send later (tests), when RRefs ride
// with it, and when they are a Remote's value, which the owner keeps.

// wireBufs holds the buffers; a buffer grown past maxWireBuf is not kept.
var wireBufs = sync.Pool{New: func() any { b := make([]byte, 0, wireBufSize); return &b }}

const (
	wireBufSize = 256     // a scalar, a short string, a small struct
	maxWireBuf  = 4 << 10 // larger payloads are rare enough to allocate
)

func getWireBuf() *[]byte { return wireBufs.Get().(*[]byte) }

// putWireBuf returns buf to the pool unless the sent bytes, which lie in
// it, may still be read (kept).
func putWireBuf(buf *[]byte, sent []byte, kept bool) {
	if kept && inBuffer(sent, *buf) || cap(*buf) > maxWireBuf {
		return
	}
	*buf = (*buf)[:0]
	wireBufs.Put(buf)
}

// inBuffer reports whether b lies in buf's memory: the encoding appended
// to buf without growing it. A []byte argument is sent as the caller's own
// slice, and a grown encoding is a new array: neither is buf.
func inBuffer(b, buf []byte) bool {
	return cap(b) > 0 && cap(buf) > 0 && unsafe.SliceData(b[:1]) == unsafe.SliceData(buf[:1])
}

// keepsSent reports whether a message to peer to, with refs riding along,
// may still be read after it was handed to the transport.
func (w *Worker) keepsSent(to core.WorkerID, refs int) bool {
	return to == w.id || w.cfg.jitter != nil || refs > 0
}
