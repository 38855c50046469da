package worker

import (
	"errors"
	"fmt"
	"hash/fnv"
	"reflect"
	"strconv"
	"strings"
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
func wireName[A, R any](fn string) string {
	sig, _ := signature[A, R]()
	return fn + signatureSep + strconv.FormatUint(sig, 16)
}

// splitWireName splits what a call names into the function's name and the
// caller's fingerprint (ok false when the caller sent none).
func splitWireName(s string) (name string, sig uint64, ok bool) {
	name, hex, found := strings.Cut(s, signatureSep)
	if !found {
		return s, 0, false
	}
	sig, err := strconv.ParseUint(hex, 16, 64)
	return name, sig, err == nil
}

// callerTypes describes a call's types from the caller's side.
func callerTypes[A, R any]() string {
	_, t := signature[A, R]()
	return "call " + t
}
