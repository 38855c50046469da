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

// GroupPath is the group protocol's spec (the hello and the shutdown
// barrier the runtime's members speak beside RRef).
const GroupPath = "spec/group.rspec"

// GroupSource is the group protocol's spec.
//
//go:embed group.rspec
var GroupSource []byte

// Group parses the embedded group spec.
func Group() (*Protocol, error) { return Parse(GroupPath, GroupSource) }

// FIFOWirePath is the fifo transport's fixed frames (its handshake's hello).
const FIFOWirePath = "spec/fifowire.rspec"

// FIFOWireSource is the fifo transport's spec.
//
//go:embed fifowire.rspec
var FIFOWireSource []byte

// NodeWirePath is the hello of protocol/node's links.
const NodeWirePath = "spec/nodewire.rspec"

// NodeWireSource is protocol/node's spec.
//
//go:embed nodewire.rspec
var NodeWireSource []byte

// Embedded are the project's own specs, as path and source, RRef first:
// what rrefgen gen and check work on when no spec is named.
var Embedded = []struct {
	Path   string
	Source []byte
}{{RRefPath, RRefSource}, {GroupPath, GroupSource}, {FIFOWirePath, FIFOWireSource}, {NodeWirePath, NodeWireSource}}
