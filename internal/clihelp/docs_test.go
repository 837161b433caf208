package clihelp_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// repoPath is a path into the repository as the docs write it in
// backquotes: `internal/…`, `cmd/…`, `hack/…`, `contrib/…`, `docs/…`.
var repoPath = regexp.MustCompile("`((?:internal|cmd|hack|contrib|docs)/[A-Za-z0-9_./-]*)")

// mdLink is a relative Markdown link: [text](target), not http(s).
var mdLink = regexp.MustCompile(`\]\(([^)#:]+)(#[^)]*)?\)`)

// The README and every page of docs/ name only repository paths that exist
// and link only to files that exist, so docs/contributing.md's map and the
// links between pages stay true as files move.
func TestDocsPathsExist(t *testing.T) {
	root := filepath.Join("..", "..")
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	pages = append(pages, filepath.Join(root, "README.md"))
	for _, page := range pages {
		data, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		name, _ := filepath.Rel(root, page)
		for _, m := range repoPath.FindAllStringSubmatch(string(data), -1) {
			p := strings.TrimRight(m[1], ".,")
			if _, err := os.Stat(filepath.Join(root, p)); err != nil {
				t.Errorf("%s names %s, which does not exist", name, p)
			}
		}
		for _, m := range mdLink.FindAllStringSubmatch(string(data), -1) {
			if _, err := os.Stat(filepath.Join(filepath.Dir(page), m[1])); err != nil {
				t.Errorf("%s links to %s, which does not exist", name, m[1])
			}
		}
	}
}
