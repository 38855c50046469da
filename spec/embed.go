// Package spec is the rrefgen spec language: a small declarative language for
// message protocols and their state machines (see README.md), its parser and
// validator, and the resolved model the generator reads. It also embeds the
// project's own specs, the RRef protocol first.
package spec

import _ "embed"

// RRefPath is the RRef spec's path in the repository, recorded in generated headers.
const RRefPath = "spec/rref.rspec"

// RRefSource is the RRef protocol spec, embedded so every tool has it without files.
//
//go:embed rref.rspec
var RRefSource []byte

// RRef parses the embedded RRef spec. It cannot fail in a released build: a test
// checks the embedded spec.
func RRef() (*Protocol, error) { return Parse(RRefPath, RRefSource) }
