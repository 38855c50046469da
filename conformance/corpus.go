package conformance

import (
	"embed"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// corpusFS is the scenario corpus, embedded so rrefgen runs it with no files.
//
//go:embed testdata/*.rref
var corpusFS embed.FS

// Corpus returns the embedded scenarios, sorted by name.
func Corpus() ([]*Scenario, error) {
	entries, err := fs.Glob(corpusFS, "testdata/*.rref")
	if err != nil {
		return nil, err
	}
	sort.Strings(entries)
	var out []*Scenario
	for _, e := range entries {
		src, err := corpusFS.ReadFile(e)
		if err != nil {
			return nil, err
		}
		sc, err := Parse(strings.TrimPrefix(e, "testdata/"), src)
		if err != nil {
			return nil, err
		}
		out = append(out, sc)
	}
	return out, nil
}

// Load reads scenario files and folders (every .rref inside, recursively).
func Load(paths []string) ([]*Scenario, error) {
	var files []string
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			return nil, err
		}
		if !st.IsDir() {
			files = append(files, p)
			continue
		}
		err = filepath.WalkDir(p, func(path string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() && strings.HasSuffix(path, ".rref") {
				files = append(files, path)
			}
			return err
		})
		if err != nil {
			return nil, err
		}
	}
	var out []*Scenario
	var errs []string
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		sc, err := Parse(f, src)
		if err != nil {
			errs = append(errs, err.Error())
			continue
		}
		out = append(out, sc)
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("%s", strings.Join(errs, "\n"))
	}
	return out, nil
}
