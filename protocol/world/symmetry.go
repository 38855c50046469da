package world

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"

	"github.com/rrefkit/rref/explore"
	"github.com/rrefkit/rref/internal/deep"
	"github.com/rrefkit/rref/protocol"
)

// Symmetry. A Config that declares groups of interchangeable nodes
// (Config.Symmetric) makes its worlds explore.Symmetric models: the
// exhaustive search keeps one state of each class of states alike but for
// which node of a group is which, and still steps only the world's own
// states, so its traces replay as they are.
//
// A renaming of a group's nodes renames them everywhere a world holds
// them: their places among the nodes; the sender and addressee of every
// message in flight; and every value of type protocol.NodeID reached from
// a handler, a message's fields, a timer's key or a saved record (a map
// keyed by names is encoded by its renamed keys, so its order does not
// show). A spec writes such a field or payload as `node` (spec/README.md).
//
// What the world cannot rename, it refuses or reports, never merges:
//
//   - Start refuses (ErrConfig and explore.ErrRefused) a group that names
//     no node, a node twice, or nodes of different machines or crash
//     budgets, and a group whose nodes do not start alike: for each
//     renaming, every node's handler as Role.New makes it (at the start
//     and at each restart) must be, renamed, the handler of the node it
//     is renamed to, and the world as it starts must be itself renamed. A
//     chain of borrowers, each naming its successor, is not symmetric;
//     a coordinator holding its participants in a slice is not either
//     (renamed, the slice's order changes): hold them in a set.
//   - A name of a group's node held in a plain string, not a
//     protocol.NodeID (in a handler, a message sent, a timer's key, a
//     saved record), is a violation, InvariantSymmetry, with its
//     schedule, whether the search uses the symmetry or not.
//
// What it cannot see is the user's to keep: handlers treat names as
// opaque (they compare them for equality and use them as keys, but do
// not order them where the order matters, parse them, or name a group's
// node in a literal), names hide in no longer string, number or bytes,
// and every check reads the group's nodes alike.

var nodeIDType = reflect.TypeOf(protocol.NodeID(""))

// errPlainName is matched by the error of a value holding a name of a
// symmetric group's node in a plain string.
var errPlainName = errors.New("a name the world renames, in a plain string")

// symmetry is the declared groups, for every world of a Config.
type symmetry struct {
	groups  [][]int // node indexes, by group, as declared
	group   []int   // by node: its group, or -1
	pos     []int   // by node: its place in its group
	members map[protocol.NodeID]bool

	mu        sync.RWMutex
	renamings map[string]*renaming // by the new places of the members, group by group
	named     map[string]bool      // by frame: whether its message names a member
	frames    map[frameKey]string  // a frame that names a member, renamed
}

type frameKey struct {
	frame    string
	renaming int
}

// refuse is Start's error for a symmetry it cannot honour.
func refuse(format string, args ...any) error {
	return fmt.Errorf("%w: %w: %s", ErrConfig, explore.ErrRefused, fmt.Sprintf(format, args...))
}

func newSymmetry(s *settings, groups [][]protocol.NodeID) (*symmetry, error) {
	sym := &symmetry{group: make([]int, len(s.nodes)), pos: make([]int, len(s.nodes)), members: map[protocol.NodeID]bool{},
		renamings: map[string]*renaming{}, named: map[string]bool{}, frames: map[frameKey]string{}}
	for i := range sym.group {
		sym.group[i] = -1
	}
	for g, names := range groups {
		if len(names) == 0 {
			return nil, refuse("symmetric group %d names no node", g)
		}
		var idx []int
		for k, name := range names {
			i, ok := s.index[name]
			switch {
			case !ok:
				return nil, refuse("symmetric group %v names %s, which is no node", names, name)
			case sym.group[i] >= 0:
				return nil, refuse("node %s is in symmetric groups %v and %v: a node is in one group, once", name, groups[sym.group[i]], names)
			}
			first, n := s.nodes[s.index[names[0]]], s.nodes[i]
			switch {
			case n.Role.Machine != first.Role.Machine:
				return nil, refuse("symmetric group %v: node %s runs machine %s, node %s machine %s: only nodes of one machine are interchangeable",
					names, first.Name, first.Role.Machine.Info.Name, n.Name, n.Role.Machine.Info.Name)
			case n.Crashes != first.Crashes:
				return nil, refuse("symmetric group %v: node %s may crash %d times, node %s %d: interchangeable nodes have one budget",
					names, first.Name, first.Crashes, n.Name, n.Crashes)
			}
			sym.group[i], sym.pos[i] = g, k
			sym.members[name] = true
			idx = append(idx, i)
		}
		sym.groups = append(sym.groups, idx)
	}
	return sym, nil
}

// plain is Names.Other: a plain string that is a member's name.
func (sym *symmetry) plain(s string) error {
	if sym.members[protocol.NodeID(s)] {
		return fmt.Errorf("holds %q: %w", s, errPlainName)
	}
	return nil
}

// encode is the canonical encoding of v (a handler, a timer's key), and
// whether it holds a member's name; with symmetric groups, an error
// matching errPlainName when it holds one in a plain string.
func (w *World) encode(v any) (enc []byte, named bool, err error) {
	sym := w.s.sym
	if sym == nil {
		enc, err = deep.Append(nil, v)
		return enc, false, err
	}
	enc, err = deep.AppendNames(nil, v, &deep.Names{Type: nodeIDType, Other: sym.plain, Rename: func(s string) string {
		named = named || sym.members[protocol.NodeID(s)]
		return s
	}})
	return enc, named, err
}

// plainNamesIn reports false, after failing, when node i sends or saves a
// message that holds a member's name in a plain string.
func (w *World) plainNamesIn(i int, what string, m any) bool {
	if w.s.sym == nil {
		return true
	}
	_, _, err := w.encode(m)
	w.failEncoding(i, what, err)
	return err == nil
}

// renaming is a permutation of the nodes, as the world applies it. The
// renamings are made once per Config, numbered, and what a node and a
// frame become under each is kept: a step changes one node or two, and
// every state is encoded once per renaming.
type renaming struct {
	id    int
	at    []int               // slot j of the renamed world holds node at[j]
	to    []int               // node i goes to slot to[i]
	names func(string) string // a name's new name
}

// Symmetry implements explore.Symmetric: the declared groups' sizes.
func (w *World) Symmetry() []int {
	if w.s.sym == nil {
		return nil
	}
	sizes := make([]int, len(w.s.sym.groups))
	for g, idx := range w.s.sym.groups {
		sizes[g] = len(idx)
	}
	return sizes
}

// AppendPermuted implements explore.Symmetric: the encoding of the world
// with its groups' nodes renamed by p.
func (w *World) AppendPermuted(b []byte, p explore.Permutation) []byte {
	return w.appendRenamed(b, w.renamingOf(p.Rename))
}

// appendRenamed is the world's encoding renamed by r.
func (w *World) appendRenamed(b []byte, r *renaming) []byte {
	for j := range w.nodes {
		b = w.appendNode(b, r.at[j], r)
	}
	return w.appendNet(b, r)
}

// renamingOf is the renaming that moves member k of group g to place
// move(g, k) in its group.
func (w *World) renamingOf(move func(g, k int) int) *renaming {
	sym := w.s.sym
	var buf [64]byte
	key := buf[:0]
	for g, idx := range sym.groups {
		for k := range idx {
			key = binary.AppendUvarint(key, uint64(move(g, k)))
		}
	}
	sym.mu.RLock()
	r := sym.renamings[string(key)]
	sym.mu.RUnlock()
	if r != nil {
		return r
	}
	sym.mu.Lock()
	defer sym.mu.Unlock()
	if r := sym.renamings[string(key)]; r != nil {
		return r
	}
	r = &renaming{id: len(sym.renamings), at: make([]int, len(w.nodes)), to: make([]int, len(w.nodes))}
	sym.renamings[string(key)] = r
	for i := range w.nodes {
		r.to[i] = i
		if g := sym.group[i]; g >= 0 {
			r.to[i] = sym.groups[g][move(g, sym.pos[i])]
		}
		r.at[r.to[i]] = i
	}
	s := w.s
	r.names = func(name string) string {
		if i, ok := s.index[protocol.NodeID(name)]; ok {
			return string(s.nodes[r.to[i]].Name)
		}
		return name
	}
	return r
}

// swap is the renaming that exchanges nodes a and b, both of one group.
func (w *World) swap(a, b int) *renaming {
	sym := w.s.sym
	return w.renamingOf(func(g, k int) int {
		switch {
		case g != sym.group[a]:
			return k
		case k == sym.pos[a]:
			return sym.pos[b]
		case k == sym.pos[b]:
			return sym.pos[a]
		}
		return k
	})
}

func (r *renaming) deepNames() *deep.Names { return &deep.Names{Type: nodeIDType, Rename: r.names} }

// nodeCache keeps what a node becomes under each renaming: the node is
// shared by the worlds that did not change it since.
type nodeCache struct {
	mu sync.Mutex
	by []*renamedNode // by renaming
}

type renamedNode struct {
	head   []byte  // appendNode's encoding of all but the timers' times
	timers []timer // the timers, their keys renamed, in their order
}

// renamedNode is node i renamed by r, from its cache.
func (w *World) renamedNode(i int, r *renaming) *renamedNode {
	n := w.nodes[i]
	c := n.cache
	if c == nil {
		return w.renameNode(n, r) // a world without symmetry, asked anyway
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if r.id < len(c.by) && c.by[r.id] != nil {
		return c.by[r.id]
	}
	rn := w.renameNode(n, r)
	if r.id >= len(c.by) {
		c.by = append(c.by, make([]*renamedNode, r.id+1-len(c.by))...)
	}
	c.by[r.id] = rn
	return rn
}

func (w *World) renameNode(n *node, r *renaming) *renamedNode {
	enc := n.enc
	if n.named {
		enc, _ = deep.AppendNames(nil, n.handler, r.deepNames()) // it encoded as it was
	}
	timers := w.renameTimers(n.timers, r)
	return &renamedNode{head: appendHead(nil, n, w.renameFrame(n.saved, r), enc, len(timers)), timers: timers}
}

// renameFrame is a frame (a message in flight, a saved record) with the
// names in its message renamed by r. A frame that names no member, or
// does not decode (which delivering it reports), is as it was.
func (w *World) renameFrame(frame string, r *renaming) string {
	if frame == "" {
		return frame
	}
	sym := w.s.sym
	sym.mu.RLock()
	named, known := sym.named[frame]
	renamed, done := sym.frames[frameKey{frame, r.id}]
	sym.mu.RUnlock()
	switch {
	case known && !named:
		return frame
	case done:
		return renamed
	}
	renamed, named = w.renameMessage(frame, r)
	sym.mu.Lock()
	sym.named[frame] = named
	if named {
		sym.frames[frameKey{frame, r.id}] = renamed
	}
	sym.mu.Unlock()
	return renamed
}

func (w *World) renameMessage(frame string, r *renaming) (renamed string, named bool) {
	m, err := w.s.codec.Decode([]byte(frame))
	if err != nil {
		return frame, false
	}
	copied, err := deep.CopyNames(m, &deep.Names{Type: nodeIDType, Rename: func(s string) string {
		named = named || w.s.sym.members[protocol.NodeID(s)]
		return r.names(s)
	}})
	if err != nil || !named {
		return frame, named
	}
	out, err := w.s.codec.Append(nil, copied)
	if err != nil {
		return frame, named
	}
	return string(out), true
}

// renameTimers is a node's timers with their keys renamed by r, in the
// order of the renamed keys.
func (w *World) renameTimers(timers []timer, r *renaming) []timer {
	if !slices.ContainsFunc(timers, func(t timer) bool { return t.named }) {
		return timers
	}
	out := slices.Clone(timers)
	for k, t := range out {
		if t.named {
			key, _ := deep.AppendNames(nil, t.payload, r.deepNames())
			out[k].key = string(key)
		}
	}
	slices.SortFunc(out, func(a, b timer) int {
		if a.event != b.event {
			return a.event - b.event
		}
		return strings.Compare(a.key, b.key)
	})
	return out
}

// checkSymmetric checks, of the start w, that every renaming of the
// declared groups maps the world onto itself as it starts and as its
// nodes restart: it is enough to check the swaps of each group's first
// node with each other, which make up every renaming.
func (w *World) checkSymmetric() error {
	s := w.s
	fresh := make([]any, len(s.nodes))
	for i, n := range s.nodes {
		fresh[i] = n.Role.New()
	}
	for _, idx := range s.sym.groups {
		a := idx[0]
		for _, b := range idx[1:] {
			r := w.swap(a, b)
			pair := fmt.Sprintf("swapping %s and %s", w.name(a), w.name(b))
			for i := range s.nodes {
				j := r.to[i]
				renamed, err := deep.CopyNames(fresh[i], r.deepNames())
				if err != nil {
					return fmt.Errorf("%w: node %s: %v", ErrConfig, w.name(i), err)
				}
				got, _ := deep.Append(nil, renamed)
				want, _ := deep.Append(nil, fresh[j])
				if bytes.Equal(got, want) {
					continue
				}
				if i == j {
					return refuse("the symmetric group of %s and %s: node %s starts as %+v, which %s makes %+v: it tells them apart (a node that names a group's nodes must name them all alike: hold them in a set, not a slice, and name none on its own)",
						w.name(a), w.name(b), w.name(i), fresh[i], pair, renamed)
				}
				return refuse("the symmetric group of %s and %s: node %s starts as %+v, which %s makes %+v, but node %s starts as %+v: they are not interchangeable",
					w.name(a), w.name(b), w.name(i), fresh[i], pair, renamed, w.name(j), fresh[j])
			}
			for j := range s.nodes {
				if !bytes.Equal(w.appendNode(nil, r.at[j], r), w.appendNode(nil, j, nil)) {
					return refuse("the symmetric group of %s and %s: as the world starts (its start hooks run), node %s is not what %s makes of node %s: a start hook tells them apart",
						w.name(a), w.name(b), w.name(j), pair, w.name(r.at[j]))
				}
			}
			if !bytes.Equal(w.appendNet(nil, r), w.appendNet(nil, nil)) {
				return refuse("the symmetric group of %s and %s: the messages the start hooks send are not the same %s: a start hook tells them apart",
					w.name(a), w.name(b), pair)
			}
		}
	}
	return nil
}
