package core

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
	"unsafe"

	"github.com/rrefkit/rref/generated/rref"
)

// derivedFields are record fields the state encoding leaves out on
// purpose, each with the reason it may.
var derivedFields = map[string]string{
	"users.fork": "the key the record is stored under, which is encoded",
}

// fullCore is a core with one record in every table, every field of every
// record (and of what the records hold) set, none to its zero value.
func fullCore() *Core {
	c := New(1, WithIDSeed([32]byte{1}))
	id := RRefID{Worker: 1, Local: 7}
	fork := ForkID{Worker: 2, Local: 8}
	o := &ownerRec{state: 1, value: []byte("v"), err: 1, errCode: "code", errMsg: "msg", known: 1, local: 1,
		waiting: []waitingFetch{{from: 2, fetchID: 3, handle: 4, fork: ForkID{Worker: 2, Local: 16}}}, charges: []charge{{peer: 2, n: 1}},
		creator: fork, ackHeld: true}
	o.forks.put(fork, forkRec{state: 1, holder: 2})
	c.owners.put(id, o)
	c.awaiting.put(id, 5)
	c.charged[2] = 1
	c.users.put(fork, &userRec{state: 1, owner: 3, rref: RRefID{Worker: 3, Local: 9}, fork: fork,
		parent: ForkID{Worker: 4, Local: 10}, parentW: 4, handle: 5, pinned: 1, fetching: 1, timedOut: true,
		runs: []*pendingRun{{waiting: 1, run: Run{Kind: RunCall, From: 2, CallID: 6, RRef: RRefID{Worker: 2, Local: 11},
			Fn: "f", Args: []byte("a"), Handles: []HandleID{7}, Timeout: 8, Cancelled: true, PastDeadline: true,
			Meta: []rref.MetaEntry{{Key: "k", Value: []byte("v")}}}}}})
	c.pins.put(fork, &pinRec{state: 1, rref: id, parent: ForkID{Worker: 1, Local: 12}, child: 3, owner: 1})
	c.handles[9] = &handleRec{kind: handleLost, rref: id, fork: fork, lost: 1, owner: 2}
	c.fetches[10] = fetchRec{handle: 9, fork: fork}
	c.calls[11] = 2
	c.dead = deadSet{3}
	c.tombs.add(RRefID{Worker: 1, Local: 13}, tombstone{kind: 1})
	c.goneForks.add(ForkID{Worker: 1, Local: 14}, struct{}{})
	c.earlyCancels.add(callKey{Worker: 2, Local: 15}, true)
	c.drawn, c.nextLocal, c.epoch = 1, 2, 3
	return c
}

// TestStateEncodingHasEveryField: a core's encoding is its state key, and
// explorers take two cores that encode alike for one (conformance replays
// one's answer to a message for the other's). Every field of every record
// is changed in turn, and each change must change the encoding: a field
// added to a record and not to the encoding fails here, named.
func TestStateEncodingHasEveryField(t *testing.T) {
	base := fullCore().AppendState(nil)
	tables := []string{"owners", "users", "pins", "handles", "fetches", "calls", "dead", "tombs", "goneForks", "earlyCancels"}
	changed := 0
	for _, table := range tables {
		for target := 0; ; target++ {
			c := fullCore()
			field := reflect.ValueOf(c).Elem().FieldByName(table)
			n, path := 0, ""
			if !changeLeaf(settable(field), table, target, &n, &path) {
				break
			}
			if reason, ok := derivedFields[path]; ok {
				t.Logf("%s left out: %s", path, reason)
				continue
			}
			changed++
			if bytes.Equal(c.AppendState(nil), base) {
				t.Errorf("changing %s leaves the state encoding as it was", path)
			}
		}
	}
	if changed < 40 {
		t.Fatalf("only %d fields changed: the walk misses records", changed)
	}
}

// settable makes v, possibly an unexported field, writable.
func settable(v reflect.Value) reflect.Value {
	return reflect.NewAt(v.Type(), unsafe.Pointer(v.UnsafeAddr())).Elem()
}

// changeLeaf changes the target-th leaf (a number, bool, string or byte
// slice) under v, in a fixed order, naming it in *path, and reports whether
// there was one; *n counts the leaves passed.
func changeLeaf(v reflect.Value, path string, target int, n *int, at *string) bool {
	switch v.Kind() {
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.String:
		if *n != target {
			*n++
			return false
		}
		*at = path
		switch v.Kind() {
		case reflect.Bool:
			v.SetBool(!v.Bool())
		case reflect.String:
			v.SetString(v.String() + "x")
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			v.SetInt(v.Int() + 1)
		default:
			v.SetUint(v.Uint() + 1)
		}
		return true
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 { // bytes: one leaf
			if *n != target {
				*n++
				return false
			}
			*at = path
			v.SetBytes(append(bytes.Clone(v.Bytes()), 'x'))
			return true
		}
		for i := range v.Len() {
			if changeLeaf(v.Index(i), path, target, n, at) {
				return true
			}
		}
	case reflect.Pointer:
		return !v.IsNil() && changeLeaf(v.Elem(), path, target, n, at)
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[rref.RRefID]() || v.Type() == reflect.TypeFor[rref.ForkID]() {
			// An id is one leaf: its worker and local parts are encoded together.
			return changeLeaf(settable(v.Field(1)), path, target, n, at)
		}
		if strings.HasPrefix(v.Type().Name(), "idMap[") {
			// A table: each live entry's value, as for a map (the keys
			// are ids, encoded as the entries' order and names).
			slots := settable(v.FieldByName("slots"))
			for i := range slots.Len() {
				slot := slots.Index(i)
				if slotState(slot.FieldByName("state").Uint()) != slotLive {
					continue
				}
				if changeLeaf(settable(slot.FieldByName("val")), path, target, n, at) {
					return true
				}
			}
			return false
		}
		bounded := strings.HasPrefix(v.Type().Name(), "bounded[")
		for i := range v.NumField() {
			name := v.Type().Field(i).Name
			sub := path + "." + name
			if bounded {
				if name != "m" {
					continue // the ring and the limit only order the entries
				}
				sub = path
			}
			if changeLeaf(settable(v.Field(i)), sub, target, n, at) {
				return true
			}
		}
	case reflect.Map:
		for _, k := range v.MapKeys() { // one entry per table
			e := reflect.New(v.Type().Elem()).Elem() // addressable, written back
			e.Set(v.MapIndex(k))
			if changeLeaf(e, path, target, n, at) {
				v.SetMapIndex(k, e)
				return true
			}
		}
	}
	return false
}
