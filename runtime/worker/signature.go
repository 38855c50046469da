package worker

import (
	"errors"
	"fmt"
	"hash/fnv"
	"reflect"
	"strconv"
	"strings"
	"sync"
)

// ErrTypeMismatch is matched (errors.Is) by the error of a Call or Go whose
// argument or result type is not the registered function's: the callee
// refuses it before running the function, instead of decoding garbage.
var ErrTypeMismatch = errors.New("worker: type mismatch")

// A call names its function with the fingerprint of the types the caller
// uses, after a separator no registered name contains: "add\x00" and 16
// hex digits. The callee compares it with the function's own.
const signatureSep = "\x00"

// signature is the fingerprint of a function taking A and returning R, and
// its description for errors. Types are compared by their Go spelling
// (package name included): a mismatch of int and string, or of two
// versions of a struct named alike, is caught only as far as the names
// differ.
func signature[A, R any]() (uint64, string) {
	a, r := reflect.TypeFor[A]().String(), reflect.TypeFor[R]().String()
	h := fnv.New64a()
	h.Write([]byte(a + "->" + r))
	return h.Sum64(), fmt.Sprintf("takes %s and returns %s", a, r)
}

// wireName is fn as a call names it: with the caller's types' fingerprint.
// It is on every call's path, so each (name, types) is spelled once and
// looked up after: a map keyed by value allocates nothing to read.
func wireName[A, R any](fn string) string {
	k := wireKey{fn, reflect.TypeFor[A](), reflect.TypeFor[R]()}
	wireNames.RLock()
	name, ok := wireNames.m[k]
	wireNames.RUnlock()
	if ok {
		return name
	}
	sig, _ := signature[A, R]()
	name = fn + signatureSep + strconv.FormatUint(sig, 16)
	wireNames.Lock()
	if len(wireNames.m) < maxWireNames { // a program calls few distinct functions; a bound keeps a generated name's flood out
		wireNames.m[k] = name
	}
	wireNames.Unlock()
	return name
}

type wireKey struct {
	fn   string
	a, r reflect.Type
}

// maxWireNames bounds the cache of wire names.
const maxWireNames = 4096

var wireNames = struct {
	sync.RWMutex
	m map[wireKey]string
}{m: map[wireKey]string{}}

// splitWireName splits what a call names into the function's name and the
// caller's fingerprint (ok false when the caller sent none; an unreadable
// one reads as badSignature, which matches no function).
func splitWireName(s string) (name string, sig uint64, ok bool) {
	name, hex, found := strings.Cut(s, signatureSep)
	if !found {
		return s, 0, false
	}
	sig, err := strconv.ParseUint(hex, 16, 64)
	if err != nil {
		// A fingerprint no caller of ours writes: no type can match it.
		return name, badSignature, true
	}
	return name, sig, true
}

// badSignature stands for an unreadable fingerprint: 0 is the FNV hash of
// no pair of Go type names we know of, and matching it would need one.
const badSignature = 0

// callerTypes describes a call's types from the caller's side.
func callerTypes[A, R any]() string {
	_, t := signature[A, R]()
	return "call " + t
}
