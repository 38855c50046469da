package refview

import (
	"cmp"
	"slices"
)

// Tree is a value's fork tree laid out for drawing: its owner at the root,
// each reference below the one it was copied from, and each copy in flight
// (lent, and pinned by its lender until the owner answers it) below its
// lender.
type Tree struct {
	Value         string
	Nodes         []Node // root first, then depth first
	Edges         []Edge
	Width, Height int
	// Hidden counts references left out past MaxTreeNodes.
	Hidden int
}

// Node kinds.
const (
	NodeOwner = "owner" // the value's owner
	NodeFork  = "fork"  // a reference some member holds, or that the owner counts
	NodeLent  = "lent"  // a copy in flight to a member whose snapshot does not show it yet
)

// Node is one box of a tree.
type Node struct {
	Kind string
	// ID is the value's id for the owner, else the reference's own.
	ID string
	// Member is the owner, the reference's holder, or the member a copy
	// in flight goes to.
	Member string
	// State is the value's state for the owner, the holder's state of a
	// reference, "in flight" for a lent copy, or "counted by owner" for a
	// fork only its owner's snapshot shows.
	State string
	X, Y  int // the box's top left
}

// Edge joins a node to one it was copied from; Dashed when the copy is in
// flight or the tree does not know whom it was copied from.
type Edge struct {
	X1, Y1, X2, Y2 int
	Dashed         bool
}

// The tree's geometry, in pixels: a box holds three short lines.
const (
	NodeWidth  = 176
	NodeHeight = 52
	nodeGap    = 16
	levelGap   = 40
	treeMargin = 8
)

// MaxTreeNodes bounds a drawn tree: a value shared with thousands of
// members would draw a page no one reads.
const MaxTreeNodes = 300

// Fork states the tree names itself.
const (
	stateInFlight = "in flight"
	stateCounted  = "counted by owner"
)

type treeNode struct {
	Node
	parent   string // the key of the node it was copied from; "" is the owner
	dashed   bool
	children []string
}

// Tree lays out value id's fork tree; false when the group knows no such
// value.
func (g *Group) Tree(id string) (Tree, bool) {
	v := g.byID[id]
	if v == nil {
		return Tree{}, false
	}
	const root = ""
	state := string(v.State)
	if !v.Seen {
		state = "not seen"
	}
	nodes := map[string]*treeNode{root: {Node: Node{Kind: NodeOwner, ID: v.ID, Member: v.Owner, State: state}}}
	for _, f := range v.Forks {
		if f.ID == v.ID {
			continue // the owner's own fork, from a Remote to itself: the root
		}
		nodes[f.ID] = &treeNode{Node: Node{Kind: NodeFork, ID: f.ID, Member: f.Holder, State: stateCounted}, dashed: true}
	}
	for _, r := range v.Refs {
		parent := r.Parent
		if parent == v.ID {
			parent = root // handed out by the owner
		}
		nodes[r.Fork] = &treeNode{Node: Node{Kind: NodeFork, ID: r.Fork, Member: r.Member, State: string(r.State)}, parent: parent}
	}
	for _, r := range v.Refs {
		for _, l := range r.Lent {
			if n := nodes[l.Fork]; n == nil || n.State == stateCounted {
				nodes[l.Fork] = &treeNode{Node: Node{Kind: NodeLent, ID: l.Fork, Member: l.To, State: stateInFlight}, parent: r.Fork, dashed: true}
			}
		}
	}
	// Link each node below its parent; one whose parent the tree lacks
	// (or that would close a cycle, in a corrupt snapshot) hangs from the
	// owner, dashed.
	keys := make([]string, 0, len(nodes))
	for k := range nodes {
		if k != root {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, func(a, b string) int {
		return cmp.Or(cmp.Compare(nodes[a].Member, nodes[b].Member), cmp.Compare(a, b))
	})
	for _, k := range keys {
		n := nodes[k]
		if _, ok := nodes[n.parent]; !ok || n.parent == k {
			n.parent, n.dashed = root, true
		}
	}
	for _, k := range keys {
		if !reachesRoot(nodes, k) {
			nodes[k].parent, nodes[k].dashed = root, true // breaks its cycle: the rest of it now reaches the owner through it
		}
	}
	for _, k := range keys {
		nodes[nodes[k].parent].children = append(nodes[nodes[k].parent].children, k)
	}
	t := Tree{Value: v.ID}
	lay := layout{nodes: nodes, tree: &t}
	lay.place(root, 0)
	t.Hidden = len(nodes) - len(t.Nodes)
	t.Width = 2*treeMargin + max(lay.slots, 1)*(NodeWidth+nodeGap) - nodeGap
	t.Height = 2*treeMargin + lay.depth*(NodeHeight+levelGap) + NodeHeight
	for _, n := range t.Nodes[1:] {
		tn, p := nodes[n.ID], lay.at[nodes[n.ID].parent]
		t.Edges = append(t.Edges, Edge{X1: p.X + NodeWidth/2, Y1: p.Y + NodeHeight, X2: n.X + NodeWidth/2, Y2: n.Y, Dashed: tn.dashed})
	}
	return t, true
}

// reachesRoot reports whether following k's parents ends at the owner.
func reachesRoot(nodes map[string]*treeNode, k string) bool {
	for steps := 0; steps <= len(nodes); steps++ {
		if k == "" {
			return true
		}
		k = nodes[k].parent
	}
	return false // a cycle
}

// layout places a tree's boxes: leaves side by side in depth-first order,
// each parent centred over its children.
type layout struct {
	nodes map[string]*treeNode
	tree  *Tree
	at    map[string]Node
	slots int
	depth int
}

func (l *layout) place(k string, depth int) (Node, bool) {
	if len(l.tree.Nodes) >= MaxTreeNodes {
		return Node{}, false
	}
	if l.at == nil {
		l.at = map[string]Node{}
	}
	n := l.nodes[k]
	i := len(l.tree.Nodes)
	l.tree.Nodes = append(l.tree.Nodes, n.Node)
	l.depth = max(l.depth, depth)
	var first, last Node
	placed := 0
	for _, c := range n.children {
		if cn, ok := l.place(c, depth+1); ok {
			if placed == 0 {
				first = cn
			}
			last = cn
			placed++
		}
	}
	x := treeMargin + l.slots*(NodeWidth+nodeGap)
	if placed > 0 {
		x = (first.X + last.X) / 2
	} else {
		l.slots++
	}
	node := n.Node
	node.X, node.Y = x, treeMargin+depth*(NodeHeight+levelGap)
	l.tree.Nodes[i] = node
	l.at[k] = node
	return node, true
}
