package conformance

import (
	"cmp"
	"encoding/binary"
	"strconv"
	"strings"
)

// The state key: a canonical encoding of the whole world, by which the
// search knows a state it has seen.

// AppendState appends a canonical encoding of the whole world: the
// program counter, and the digests of the cores, the messages in flight, the
// program's state and the monitor. Each digest is computed when its part
// changes, not for every state, and the messages' sum does not depend on
// their order (see digest).
func (w *world) AppendState(b []byte) []byte {
	b = binary.AppendUvarint(b, uint64(w.prog.PC()))
	b = strconv.AppendBool(b, w.returning)
	for i := range w.slots {
		c := w.slots[i].held.core
		if w.slots[i].dead {
			b = append(b, 'X')
			continue
		}
		if w.fresh {
			// The clone check: everything afresh, and the core's cached
			// digests checked against it.
			fresh := c.RecomputeStateDigest()
			if cached := c.StateDigest(); cached != fresh {
				w.fail("encoding", 0, "%s's cached state digest is stale:\n%s", w.name(WorkerID(i+1)), c.Dump())
			}
			w.slots[i].key = digest(fresh)
		} else if w.slots[i].key == (digest{}) {
			w.slots[i].key = digest(c.StateDigest()) // a shared core is hashed once
		}
		b = w.slots[i].key.append(b)
	}
	var inflight digest
	for _, m := range w.inflight {
		inflight = inflight.add(m.digest)
	}
	b = binary.AppendUvarint(b, uint64(len(w.inflight)))
	b = inflight.append(b)
	pSum, monSum, factSum := w.p.sum, w.mon.sum, w.factSum
	if w.fresh {
		if factSum = w.recomputeFactSum(); factSum != w.factSum {
			w.fail("encoding", 0, "the counted facts' sum is stale")
		}
		// The clone check: the sums from the facts themselves, and the
		// kept ones checked against them.
		pSum, monSum = w.p.recomputeSum(), w.mon.recomputeSum()
		if pSum != w.p.sum {
			w.fail("encoding", 0, "the program state's sum is stale")
		}
		if monSum != w.mon.sum {
			w.fail("encoding", 0, "the monitor's sum is stale")
		}
	}
	b = pSum.append(b)
	b = binary.AppendUvarint(b, uint64(len(w.p.dups)))
	b = factSum.append(b)
	return monSum.append(b)
}

// cmpHandleKey orders handles by worker, then name: a comparison
// function, not sort.Slice's reflection, which allocates on every call.
func cmpHandleKey(a, b handleKey) int {
	if c := cmp.Compare(a.w, b.w); c != 0 {
		return c
	}
	return strings.Compare(a.name, b.name)
}
