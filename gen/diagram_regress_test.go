package gen_test

import (
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/rrefkit/rref/gen"
	"github.com/rrefkit/rref/spec"
)

func mustParse(t *testing.T, src string) *spec.Protocol {
	t.Helper()
	p, err := spec.Parse("d.rspec", []byte(src))
	if err != nil {
		t.Skipf("check refuses the spec (no bug): %v", err)
	}
	return p
}

// Bug (pre-existing, in every diagrams/<machine>.dot gen writes and in
// rrefgen graph -machine): DOT writes "digraph %s" with the machine's name
// unquoted, and a machine named Node, Edge, Graph, Strict... (DOT keywords,
// in any case) makes a file Graphviz refuses.
func TestDOTKeywordMachineName(t *testing.T) {
	dot, err := exec.LookPath("dot")
	if err != nil {
		t.Skip("no Graphviz")
	}
	p := mustParse(t, "protocol d;\nversion 1;\nmachine Node { start state s; final state f; event go; on go: s -> f; }\n")
	cmd := exec.Command(dot, "-Tsvg")
	cmd.Stdin = strings.NewReader(gen.DOT(p.Machines[0]))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("Graphviz refuses diagrams/node.dot: %v: %.200s", err, out)
	}
}

// Bug (eb1b3e6): DOTProtocol names each machine's cluster "cluster_"+name
// and its legend "cluster_legend": a machine named legend is the same
// subgraph as the legend, so its cluster takes the legend's label and
// dashed style (the picture shows no "machine legend").
func TestDOTProtocolLegendMachine(t *testing.T) {
	p := mustParse(t, "protocol d;\nversion 1;\nmachine legend { start state s; final state f; event go; on go: s -> f; }\n")
	doc := gen.DOTProtocol(p)
	names := regexp.MustCompile(`subgraph "?([A-Za-z0-9_]+)"? \{`).FindAllStringSubmatch(doc, -1)
	seen := map[string]bool{}
	for _, n := range names {
		if seen[n[1]] {
			t.Errorf("two subgraphs named %s: the machine's cluster is the legend's", n[1])
		}
		seen[n[1]] = true
	}
}

// Bug (eb1b3e6): MermaidProtocol names a machine's composite state by the
// machine's name and each of its states machine_state. Machine a_x and
// state x of machine a are distinct in Go (AX... and AX), so check accepts
// them, but both are the Mermaid state a_x: a state of one machine is the
// other machine's box.
func TestMermaidProtocolIDsCollide(t *testing.T) {
	p := mustParse(t, `protocol d;
version 1;
machine a { start state x; final state f; event go; on go: x -> f; }
machine a_x { start state s; final state g; event go; on go: s -> g; }
`)
	doc := gen.MermaidProtocol(p)
	composite := regexp.MustCompile(`(?m)^\s*state ([A-Za-z0-9_]+) \{`).FindAllStringSubmatch(doc, -1)
	simple := regexp.MustCompile(`(?m)^\s*state "[^"]*" as ([A-Za-z0-9_]+)$`).FindAllStringSubmatch(doc, -1)
	ids := map[string]int{}
	for _, m := range append(composite, simple...) {
		ids[m[1]]++
	}
	for id, n := range ids {
		if n > 1 {
			t.Errorf("Mermaid id %s names %d things:\n%s", id, n, doc)
		}
	}
}
