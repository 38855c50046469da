// Package generated holds the Go that rrefgen writes for the specs in spec/,
// one package per protocol. Nothing here is edited by hand: change the spec or
// the generator and run go generate ./generated (rrefgen gen). A test fails
// when the committed output is stale.
package generated

//go:generate go run ../cmd/rrefgen gen
