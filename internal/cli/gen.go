package cli

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/google/go-cmp/cmp"

	"github.com/rrefkit/rref/gen"
	"github.com/rrefkit/rref/spec"
)

// ModulePath is this module's import path, under which generated packages live.
const ModulePath = "github.com/rrefkit/rref"

func init() {
	register(command{"gen", "generate Go from a spec (-check: fail when generated/ is stale)", runGen})
	register(command{"check", "validate specs without generating", runCheck})
	register(command{"graph", "print a machine diagram (dot or mermaid)", runGraph})
}

func (env *Env) abs(p string) string {
	if filepath.IsAbs(p) || env.Dir == "" {
		return p
	}
	return filepath.Join(env.Dir, p)
}

// loadSpecs parses the named specs, or the project's own (spec.Embedded)
// when none is named.
// Parse errors are printed; ok is false when any spec is invalid.
func loadSpecs(env *Env, cmd string, names []string, opt spec.Options) ([]*spec.Protocol, bool) {
	if len(names) == 0 {
		var out []*spec.Protocol
		for _, e := range spec.Embedded {
			p, err := spec.ParseWith(e.Path, e.Source, opt)
			if err != nil {
				fmt.Fprintln(env.Stderr, err)
				return nil, false
			}
			out = append(out, p)
		}
		return out, true
	}
	var out []*spec.Protocol
	ok := true
	for _, n := range names {
		src, err := spec.ReadFile(env.abs(n))
		if errors.Is(err, spec.ErrInvalid) {
			fmt.Fprintln(env.Stderr, err)
			ok = false
			continue
		}
		if err != nil {
			fmt.Fprintf(env.Stderr, "rrefgen %s: %v\n", cmd, err)
			ok = false
			continue
		}
		p, err := spec.ParseWith(filepath.ToSlash(n), src, opt)
		if err != nil {
			fmt.Fprintln(env.Stderr, err)
			ok = false
			continue
		}
		out = append(out, p)
	}
	return out, ok
}

// findModuleRoot walks up from dir to the folder holding this module's go.mod.
func findModuleRoot(dir string) (string, error) {
	if dir == "" {
		var err error
		if dir, err = os.Getwd(); err != nil {
			return "", err
		}
	}
	for d := dir; ; {
		data, err := os.ReadFile(filepath.Join(d, "go.mod"))
		if err == nil && bytes.Contains(data, []byte("module "+ModulePath+"\n")) {
			return d, nil
		}
		parent := filepath.Dir(d)
		if parent == d {
			return "", errors.New("not inside the " + ModulePath + " module; name the output with -out and -pkg")
		}
		d = parent
	}
}

func runGen(env *Env, args []string) int {
	fs := newFlags(env, "gen", "[-check] [-out DIR -pkg PATH] [spec ...]", `
Generates one Go package per spec: message structs and codecs, frames and a
decoder, state machines, diagrams (DOT, Mermaid) and a PROTOCOL.md page.
With no spec named, generates the project's own specs (RRef, and the group
protocol the runtime speaks beside it) into generated/<protocol> of
the module that holds the working folder. With -check, writes nothing, prints
a diff of every stale file and exits 1 when the output is not up to date.`)
	check := fs.Bool("check", false, "compare instead of writing; exit 1 when stale")
	out := fs.String("out", "", "output folder (default: <module>/generated/<protocol>)")
	pkg := fs.String("pkg", "", "import path of the output package, written in its import comments; the package's name is the protocol's, whatever the path's last element (default: "+ModulePath+"/generated/<protocol>)")
	initialisms := initialismsFlag(fs)
	if st := parseFlags(env, fs, args); st >= 0 {
		return st
	}
	if *pkg != "" && *out == "" {
		// Without -out, gen writes the project's generated/ packages, whose
		// import paths are the module's: another path there breaks them
		// (it rewrote both committed packages).
		return usageError(env, "gen", "-pkg %s names the package of a folder given by -out; give -out too", *pkg)
	}
	specs, ok := loadSpecs(env, "gen", fs.Args(), initialismsOf(*initialisms))
	if !ok {
		return ExitFail
	}
	if *out != "" && len(specs) > 1 {
		return usageError(env, "gen", "-out names one folder; give one spec at a time")
	}
	stale := false
	for _, p := range specs {
		dir, pkgPath := *out, *pkg
		if dir == "" {
			root, err := findModuleRoot(env.Dir)
			if err != nil {
				return failed(env, "gen", err)
			}
			dir = filepath.Join(root, "generated", p.Name)
		} else {
			dir = env.abs(dir)
		}
		if pkgPath == "" {
			pkgPath = path.Join(ModulePath, "generated", p.Name)
		}
		files, err := gen.Generate(p, pkgPath)
		if err != nil {
			return failed(env, "gen", err)
		}
		if *check {
			diffs, err := Stale(dir, files)
			if err != nil {
				return failed(env, "gen", err)
			}
			for _, d := range diffs {
				fmt.Fprintln(env.Stdout, d)
				stale = true
			}
			continue
		}
		if err := Write(dir, files); err != nil {
			return failed(env, "gen", err)
		}
		fmt.Fprintf(env.Stdout, "rrefgen gen: wrote %d files for %s to %s\n", len(files), p.Path, dir)
	}
	if stale {
		fmt.Fprintln(env.Stderr, "rrefgen gen -check: generated code is stale; run rrefgen gen (or go generate ./...)")
		return ExitFail
	}
	if *check {
		fmt.Fprintln(env.Stdout, "rrefgen gen -check: generated code is up to date")
	}
	return ExitOK
}

// Write replaces dir's generated files with files, removing generated files that
// are no longer produced.
func Write(dir string, files []gen.File) error {
	keep := map[string]bool{}
	for _, f := range files {
		p := filepath.Join(dir, filepath.FromSlash(f.Name))
		keep[p] = true
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, f.Content, 0o644); err != nil {
			return err
		}
	}
	existing, err := generatedFiles(dir)
	if err != nil {
		return err
	}
	for _, p := range existing {
		if !keep[p] {
			if err := os.Remove(p); err != nil {
				return err
			}
		}
	}
	return nil
}

// generatedFiles lists the files under dir that carry the generated header.
func generatedFiles(dir string) ([]string, error) {
	var out []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				return filepath.SkipDir
			}
			return err
		}
		if d.IsDir() {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if bytes.Contains(data[:min(len(data), 200)], []byte(gen.Header)) {
			out = append(out, p)
		}
		return nil
	})
	sort.Strings(out)
	return out, err
}

// Stale compares files with what dir holds and describes every difference.
func Stale(dir string, files []gen.File) ([]string, error) {
	var diffs []string
	want := map[string]bool{}
	for _, f := range files {
		p := filepath.Join(dir, filepath.FromSlash(f.Name))
		want[p] = true
		have, err := os.ReadFile(p)
		if errors.Is(err, os.ErrNotExist) {
			diffs = append(diffs, fmt.Sprintf("missing: %s", p))
			continue
		}
		if err != nil {
			return nil, err
		}
		if !bytes.Equal(have, f.Content) {
			d := cmp.Diff(strings.Split(string(have), "\n"), strings.Split(string(f.Content), "\n"))
			diffs = append(diffs, fmt.Sprintf("stale: %s (-have +want):\n%s", p, d))
		}
	}
	existing, err := generatedFiles(dir)
	if err != nil {
		return nil, err
	}
	for _, p := range existing {
		if !want[p] {
			diffs = append(diffs, fmt.Sprintf("extra: %s is generated but no longer produced", p))
		}
	}
	return diffs, nil
}

func runCheck(env *Env, args []string) int {
	fs := newFlags(env, "check", "[spec ...]", `
Parses and validates each spec and reports every problem with file:line:col.
With no spec named, checks the project's own specs (RRef, group).`)
	initialisms := initialismsFlag(fs)
	if st := parseFlags(env, fs, args); st >= 0 {
		return st
	}
	specs, ok := loadSpecs(env, "check", fs.Args(), initialismsOf(*initialisms))
	for _, p := range specs {
		transitions := 0
		for _, m := range p.Machines {
			transitions += len(m.Transitions)
		}
		layouts := ""
		if len(p.Layouts) > 0 {
			layouts = ", " + count(len(p.Layouts), "layout")
		}
		fmt.Fprintf(env.Stdout, "ok  %s: protocol %s v%d, %s%s, %s, %s, %s\n", p.Path, p.Name, p.Version,
			count(len(p.Messages), "message"), layouts, count(len(p.Machines), "machine"), count(transitions, "transition"), count(len(p.Invariants), "invariant"))
	}
	if !ok {
		return ExitFail
	}
	return ExitOK
}

func runGraph(env *Env, args []string) int {
	fs := newFlags(env, "graph", "[-format dot|mermaid] [-machine NAME] [spec]", `
Prints the state machines of a spec as Graphviz DOT or Mermaid: one document,
with a title, a cluster per machine and a legend (-machine: that machine
alone). Start states are marked, final states doubled, hot states (where a run
must not end) filled.
With no spec named, draws the embedded RRef spec.`)
	format := fs.String("format", "dot", "dot or mermaid")
	machine := fs.String("machine", "", "only this machine (default: all)")
	initialisms := initialismsFlag(fs)
	if st := parseFlags(env, fs, args); st >= 0 {
		return st
	}
	if *format != "dot" && *format != "mermaid" {
		return usageError(env, "graph", "unknown -format %q (dot or mermaid)", *format)
	}
	if fs.NArg() > 1 {
		return usageError(env, "graph", "name at most one spec")
	}
	specs, ok := loadSpecs(env, "graph", fs.Args(), initialismsOf(*initialisms))
	if !ok {
		return ExitFail
	}
	if *machine == "" {
		// One document for the whole protocol: several in one stream
		// render as one picture, or none.
		if *format == "dot" {
			fmt.Fprint(env.Stdout, gen.DOTProtocol(specs[0]))
		} else {
			fmt.Fprint(env.Stdout, gen.MermaidProtocol(specs[0]))
		}
		return ExitOK
	}
	found := false
	for _, m := range specs[0].Machines {
		if m.Name != *machine {
			continue
		}
		found = true
		if *format == "dot" {
			fmt.Fprint(env.Stdout, gen.DOT(m))
		} else {
			fmt.Fprint(env.Stdout, gen.Mermaid(m))
		}
	}
	if !found {
		var names []string
		for _, m := range specs[0].Machines {
			names = append(names, m.Name)
		}
		fmt.Fprintf(env.Stderr, "rrefgen graph: no machine %q (have %s)\n", *machine, strings.Join(names, ", "))
		return ExitFail
	}
	return ExitOK
}

// initialismsFlag is -initialisms, shared by the commands that name Go
// declarations (they must agree, or check would pass what gen names apart).
func initialismsFlag(fs *flag.FlagSet) *string {
	return fs.String("initialisms", "", "comma-separated words spelled in capitals in Go names, beyond the defaults (e.g. vm,gpu makes vm_id VMID)")
}

func initialismsOf(list string) spec.Options {
	var opt spec.Options
	for _, w := range strings.Split(list, ",") {
		if w = strings.TrimSpace(w); w != "" {
			opt.Initialisms = append(opt.Initialisms, w)
		}
	}
	return opt
}
