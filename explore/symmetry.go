package explore

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
)

// Symmetric is implemented by a model with interchangeable instances: N
// clients that run one program, say, whose states differ only in which
// client is which. Renaming the instances of a group (client 1 becomes
// client 3, 3 becomes 1) must map the system onto itself: the renamed
// state's choices are the renamed choices, each step's successor is the
// renamed successor, and a violation, an end check's verdict and whether
// the state is hot are the same. The exhaustive search then keeps one
// state of each class of states that differ only by such a renaming (the
// first it meets), and explores only it: far fewer states, the same
// verdicts.
//
// It still steps the model's own states, never renamed ones, so that
// every schedule it reports is one of the model's own and replays with
// Replay as it is; only the memo of states seen is kept by class. States
// counts classes; Schedules counts the model's schedules exactly, since
// renamed states have as many.
type Symmetric interface {
	// Symmetry lists the groups of interchangeable instances, by their
	// sizes: group g's instances are numbered 0 to Symmetry()[g]-1. It is
	// asked once, of the start state.
	Symmetry() []int
	// AppendPermuted appends the encoding AppendState would give of the
	// state with its instances renamed by p: everything that names an
	// instance (its place in a list, an owner's number, a message's
	// addressee or the number inside its frame) names p's new number for it.
	// Given the identity, it appends what AppendState does.
	AppendPermuted(b []byte, p Permutation) []byte
}

// Permutation renames the instances of a Symmetric model's groups.
type Permutation struct {
	to, from [][]int // by group: to[g][i] is i's new number, from[g][j] the instance that becomes j
}

// Rename is the new number of instance i of group g.
func (p Permutation) Rename(g, i int) int { return p.to[g][i] }

// Original is the instance of group g that becomes instance j: the state
// renamed by p has at j what the state has at Original(g, j).
func (p Permutation) Original(g, j int) int { return p.from[g][j] }

// MaxPermutations bounds the renamings a Symmetric model may declare (the
// product of its groups' factorials): each state is encoded once per
// renaming, and past 8! = 40320 encodings a state costs more than the
// states it saves are worth.
const MaxPermutations = 40320

// ErrRefused is matched (errors.Is) by Result.Refused: the search did not
// run, because the model's declarations or the options' combination
// cannot be explored soundly.
var ErrRefused = errors.New("explore: search refused")

// refusal wraps ErrRefused with why.
func refusal(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrRefused, fmt.Sprintf(format, args...))
}

// canonizer gives a state's key under a Symmetric model's renamings: the
// smallest, byte by byte, of its encodings under every renaming, which all
// the states of a class share. Without symmetry it is the state's own
// encoding. Each worker has its own (it holds scratch buffers).
type canonizer[M Model[M]] struct {
	perms     []Permutation // nil: no symmetry
	best, buf []byte
}

// newCanonizer makes the canonizer of the model m is the start of, under
// opt, or says why the model's symmetry is refused.
func newCanonizer[M Model[M]](m M, opt Options) (*canonizer[M], error) {
	c := &canonizer[M]{}
	sym, ok := any(m).(Symmetric)
	if !ok || opt.NoSymmetry {
		return c, nil
	}
	perms, err := permutations(sym.Symmetry())
	if err != nil {
		return nil, err
	}
	if len(perms) == 1 {
		return c, nil // nothing to rename: the model's own encoding
	}
	// The identity renames nothing: a model whose AppendPermuted leaves
	// out part of its state would merge states that differ.
	own := m.AppendState(nil)
	if renamed := sym.AppendPermuted(nil, perms[0]); !bytes.Equal(own, renamed) {
		return nil, refusal("the model's AppendPermuted under the identity differs from its AppendState in the start state (%d bytes against %d): it must encode the same state", len(renamed), len(own))
	}
	c.perms = perms
	return c, nil
}

// clone is a canonizer with the same renamings and scratch of its own.
func (c *canonizer[M]) clone() *canonizer[M] { return &canonizer[M]{perms: c.perms} }

// encode returns m's canonical encoding, valid until the next call.
func (c *canonizer[M]) encode(m M) []byte {
	if c.perms == nil {
		c.best = m.AppendState(c.best[:0])
		return c.best
	}
	sym := any(m).(Symmetric)
	c.best = sym.AppendPermuted(c.best[:0], c.perms[0])
	for _, p := range c.perms[1:] {
		c.buf = sym.AppendPermuted(c.buf[:0], p)
		if bytes.Compare(c.buf, c.best) < 0 {
			c.best, c.buf = c.buf, c.best
		}
	}
	return c.best
}

// permutations lists every renaming of groups of the given sizes, the
// identity first.
func permutations(sizes []int) ([]Permutation, error) {
	total := 1
	for g, n := range sizes {
		if n < 1 {
			return nil, refusal("the model's symmetry group %d has %d instances: a group has at least one", g, n)
		}
		for k := 2; k <= n; k++ {
			total *= k
			if total > MaxPermutations {
				return nil, refusal("the model's symmetry groups %v have more than %d renamings (explore.MaxPermutations): each state would be encoded once per renaming", sizes, MaxPermutations)
			}
		}
	}
	perGroup := make([][][]int, len(sizes))
	for g, n := range sizes {
		perGroup[g] = orders(n)
	}
	out := make([]Permutation, 0, total)
	choice := make([]int, len(sizes)) // the order taken in each group, as in an odometer
	for {
		p := Permutation{to: make([][]int, len(sizes)), from: make([][]int, len(sizes))}
		for g := range sizes {
			to := perGroup[g][choice[g]]
			from := make([]int, len(to))
			for i, j := range to {
				from[j] = i
			}
			p.to[g], p.from[g] = to, from
		}
		out = append(out, p)
		g := 0
		for ; g < len(sizes); g++ {
			if choice[g]++; choice[g] < len(perGroup[g]) {
				break
			}
			choice[g] = 0
		}
		if g == len(sizes) {
			return out, nil
		}
	}
}

// orders lists the permutations of 0..n-1 in lexicographic order, the
// identity first.
func orders(n int) [][]int {
	cur := make([]int, n)
	for i := range cur {
		cur[i] = i
	}
	var out [][]int
	for {
		out = append(out, append([]int(nil), cur...))
		// The next in lexicographic order (Narayana's algorithm).
		i := n - 2
		for i >= 0 && cur[i] >= cur[i+1] {
			i--
		}
		if i < 0 {
			return out
		}
		j := n - 1
		for cur[j] <= cur[i] {
			j--
		}
		cur[i], cur[j] = cur[j], cur[i]
		for a, b := i+1, n-1; a < b; a, b = a+1, b-1 {
			cur[a], cur[b] = cur[b], cur[a]
		}
	}
}

// realizeLasso finds, through the model's own states, the lasso l the
// search found in its graph of classes: a way in that steps, state by
// state, into the classes l's way in does (as short as it), and the
// shortest cycle back to the state it reaches through states of the
// violating component's classes. One exists when the model is symmetric:
// the state reached is a renaming of the one l enters, so it lies on a
// renaming of l's cycle, which, repeated until the renamings undo each
// other, comes back to it. why says what failed, otherwise.
func realizeLasso[M Model[M]](start func() M, opt Options, hash hasher, canon *canonizer[M], g *liveGraph, l lassoPath) (prefix, cycle []int, why string) {
	defer func() {
		if v := recover(); v != nil {
			why = fmt.Sprintf("the model panicked while its own lasso was looked for through states the search did not step (schedule %s): it is not symmetric as it declares: %v",
				formatSchedule(prefix), v)
		}
	}()
	keys := g.keys()
	classOf := func(m M) stateKey { return hash.key(canon.encode(m)) }
	m := start()
	for _, to := range l.through {
		choices := slices.Clone(m.Choices())
		next := -1
		var n M
		for pos, c := range choices {
			n = m.Clone()
			n.Step(c)
			if classOf(n) == keys[to] {
				next = pos
				break
			}
		}
		if next < 0 {
			return prefix, nil, fmt.Sprintf("after schedule %s, no step leads into the class of states the search stepped into from a state of the same class: the model is not symmetric as its Symmetry and AppendPermuted declare",
				formatSchedule(prefix))
		}
		prefix = append(prefix, next)
		m = n
	}
	entry := m.AppendState(nil)
	inComponent := func(k stateKey) bool { id, ok := g.ids[k]; return ok && l.comp[id] == l.c }
	type node struct {
		m           M
		parent, pos int
	}
	nodes := []node{{m: m, parent: -1}}
	seen := map[string]bool{string(entry): true}
	for at := 0; at < len(nodes) && len(nodes) <= opt.MaxStates; at++ {
		x := nodes[at].m
		for pos, c := range slices.Clone(x.Choices()) {
			n := x.Clone()
			n.Step(c)
			raw := n.AppendState(nil)
			if bytes.Equal(raw, entry) {
				cycle = []int{pos}
				for j := at; nodes[j].parent >= 0; j = nodes[j].parent {
					cycle = append(cycle, nodes[j].pos)
				}
				slices.Reverse(cycle)
				return prefix, cycle, ""
			}
			if seen[string(raw)] || n.Violation() != nil || !inComponent(classOf(n)) {
				continue
			}
			seen[string(raw)] = true
			nodes = append(nodes, node{m: n, parent: at, pos: pos})
		}
	}
	return prefix, nil, fmt.Sprintf("the search found a cycle of hot classes of states, entered by schedule %s, but no cycle of the model's own states within %d of them comes back to the state it reaches: the model is not symmetric as it declares",
		formatSchedule(prefix), len(nodes))
}
