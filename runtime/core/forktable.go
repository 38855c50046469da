package core

import "slices"

// forkTable is an owner's live forks of one value, sorted by id. A value
// has a few forks at a time; a sorted slice is copied in one allocation
// when an explorer's clone first writes its owner record (a map costs two
// or more), walks in order with no sort for the state encoding and the
// crash handling, and finds a fork by binary search.
type forkTable []forkEntry

type forkEntry struct {
	id ForkID
	forkRec
}

func (t forkTable) search(id ForkID) (int, bool) {
	return slices.BinarySearchFunc(t, id, func(e forkEntry, id ForkID) int { return compareForks(e.id, id) })
}

// get is fork id's record, and whether the owner has it.
func (t forkTable) get(id ForkID) (forkRec, bool) {
	if i, ok := t.search(id); ok {
		return t[i].forkRec, true
	}
	return forkRec{}, false
}

// set adds or replaces fork id's record.
func (t *forkTable) set(id ForkID, f forkRec) {
	i, ok := t.search(id)
	if ok {
		(*t)[i].forkRec = f
		return
	}
	*t = slices.Insert(*t, i, forkEntry{id: id, forkRec: f})
}

// del drops fork id, if the owner has it.
func (t *forkTable) del(id ForkID) {
	if i, ok := t.search(id); ok {
		*t = slices.Delete(*t, i, i+1)
	}
}

// appendForkIDs appends t's fork ids, in order.
func appendForkIDs(dst []ForkID, t forkTable) []ForkID {
	for _, e := range t {
		dst = append(dst, e.id)
	}
	return dst
}
