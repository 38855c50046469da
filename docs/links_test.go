// Package docs holds rrefkit's documentation; its test keeps the links
// between the pages true.
package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var (
	// link matches a Markdown link's target; code, fenced or inline, is
	// taken out first.
	link    = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	heading = regexp.MustCompile(`(?m)^#{1,6} (.+)$`)
	fenced  = regexp.MustCompile("(?ms)^```.*?^```")
	code    = regexp.MustCompile("(?ms)^```.*?^```|`[^`\n]+`")
	// notSlug is what GitHub drops from a heading to make its anchor.
	notSlug = regexp.MustCompile(`[^\p{L}\p{N} _-]`)
)

// TestLinks: every relative link of every Markdown file in the module names
// a file that exists, and an anchor a heading of that file makes.
func TestLinks(t *testing.T) {
	root, _ := filepath.Abs("..")
	var pages []string
	filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && strings.HasPrefix(d.Name(), ".") && path != root {
			return filepath.SkipDir
		}
		if strings.HasSuffix(path, ".md") {
			pages = append(pages, path)
		}
		return nil
	})
	if len(pages) < 10 {
		t.Fatalf("found only %d Markdown files under %s", len(pages), root)
	}
	checked := 0
	for _, page := range pages {
		text, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, page)
		for _, m := range link.FindAllStringSubmatch(code.ReplaceAllString(string(text), ""), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			checked++
			file, anchor, _ := strings.Cut(target, "#")
			path := page
			if file != "" {
				path = filepath.Join(filepath.Dir(page), file)
			}
			if !strings.HasPrefix(path, root) {
				t.Errorf("%s: link %s leaves the module", rel, target)
				continue
			}
			body, err := os.ReadFile(path)
			if err != nil {
				if info, serr := os.Stat(path); serr == nil && info.IsDir() && anchor == "" {
					continue
				}
				t.Errorf("%s: link %s: %v", rel, target, err)
				continue
			}
			if anchor != "" && !hasAnchor(string(body), anchor) {
				t.Errorf("%s: link %s: no heading makes #%s", rel, target, anchor)
			}
		}
	}
	if checked < 40 {
		t.Errorf("only %d relative links checked: the pages lost their links, or this test its way", checked)
	}
}

func hasAnchor(page, anchor string) bool {
	for _, h := range heading.FindAllStringSubmatch(fenced.ReplaceAllString(page, ""), -1) {
		slug := strings.ReplaceAll(notSlug.ReplaceAllString(strings.ToLower(h[1]), ""), " ", "-")
		if slug == anchor {
			return true
		}
	}
	return false
}
