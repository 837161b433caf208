package plan

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// imports lists the packages that the non-test Go files of dir import.
func imports(t *testing.T, dir string) map[string]bool {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no Go files in %s: %v", dir, err)
	}
	out := map[string]bool{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		af, err := parser.ParseFile(token.NewFileSet(), f, src, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, im := range af.Imports {
			p, _ := strconv.Unquote(im.Path.Value)
			out[p] = true
		}
	}
	return out
}

// TestOnlyThePlanReadsTheLabFile guards the plan's promise: labctl's
// engine, steps and modes, the provider, install-config and agent-config
// generation and the hybrid flow take the plan's facts, never the lab
// file, so no fact is derived twice.
func TestOnlyThePlanReadsTheLabFile(t *testing.T) {
	const labconfig = "github.com/bmlab/bmlab/internal/labconfig"
	dirs := []string{"../ipi", "../upi", "../agent", "../labvirt"}
	err := filepath.WalkDir("../lab", func(path string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() && d.Name() != "testdata" && d.Name() != "labtest" {
			dirs = append(dirs, path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, dir := range dirs {
		if ms, _ := filepath.Glob(filepath.Join(dir, "*.go")); len(ms) > 0 && imports(t, dir)[labconfig] {
			t.Errorf("internal/%s imports internal/labconfig: read the plan's facts (internal/plan) instead", strings.TrimPrefix(dir, "../"))
		}
	}
}

// TestOnlyTheBackendsTalkLibvirt: the go-libvirt client is held by the BMC
// backend (internal/virt, and internal/virt/domain, which defines the
// domains both the lab and the fixtures make), lab building (internal/labvirt, whose Conn is
// everyone else's way in) and the test fixtures (internal/virttest, and
// internal/kubevirt/kubevirttest, whose node plays virt-handler over a real
// libvirt domain).
func TestOnlyTheBackendsTalkLibvirt(t *testing.T) {
	const golibvirt = "github.com/digitalocean/go-libvirt"
	allowed := map[string]bool{"virt": true, "virt/domain": true, "labvirt": true, "virttest": true, "kubevirt/kubevirttest": true}
	err := filepath.WalkDir("..", func(path string, d os.DirEntry, err error) error {
		if err != nil || !d.IsDir() || path == ".." {
			return err
		}
		if ms, _ := filepath.Glob(filepath.Join(path, "*.go")); len(ms) == 0 {
			return nil
		}
		rel, _ := filepath.Rel("..", path)
		if imports(t, path)[golibvirt] && !allowed[rel] {
			t.Errorf("internal/%s imports go-libvirt: go through the libvirt provider (internal/labvirt)", rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestTheBMCSideStandsBelowLabctl: vbmcd's side (its backends, protocols,
// daemon and their test fixtures, tests included) never imports labctl's
// libvirt provider: a domain both sides define is internal/virt/domain's.
func TestTheBMCSideStandsBelowLabctl(t *testing.T) {
	const labvirt = "github.com/bmlab/bmlab/internal/labvirt"
	for _, dir := range []string{"virt", "virt/domain", "virttest", "kubevirt", "kubevirt/kubevirttest", "vbmcd", "listen", "redfish", "ipmi", "machine", "sim", "media", "webui"} {
		files, err := filepath.Glob(filepath.Join("..", dir, "*.go"))
		if err != nil || len(files) == 0 {
			t.Fatalf("no Go files in internal/%s: %v", dir, err)
		}
		for _, f := range files {
			af, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
			if err != nil {
				t.Fatal(err)
			}
			for _, im := range af.Imports {
				if p, _ := strconv.Unquote(im.Path.Value); p == labvirt {
					t.Errorf("%s imports internal/labvirt (labctl's provider): define domains with internal/virt/domain", strings.TrimPrefix(f, "../"))
				}
			}
		}
	}
}
