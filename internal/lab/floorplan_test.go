package lab_test

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/bmlab/bmlab/"

// imports lists the packages the non-test Go files of dir import (nil
// when dir has none).
func imports(t *testing.T, dir string) map[string]bool {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]bool
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		if out == nil {
			out = map[string]bool{}
		}
		for _, im := range af.Imports {
			p, _ := strconv.Unquote(im.Path.Value)
			out[p] = true
		}
	}
	return out
}

// packages are the repository's Go packages below dirs (relative to the
// repository), by import path, with their imports.
func packages(t *testing.T, dirs ...string) map[string]map[string]bool {
	t.Helper()
	root := filepath.Join("..", "..")
	out := map[string]map[string]bool{}
	for _, d := range dirs {
		err := filepath.WalkDir(filepath.Join(root, d), func(path string, de os.DirEntry, err error) error {
			if err != nil || !de.IsDir() {
				return err
			}
			if de.Name() == "testdata" {
				return filepath.SkipDir
			}
			if im := imports(t, path); im != nil {
				rel, _ := filepath.Rel(root, path)
				out[module+filepath.ToSlash(rel)] = im
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// TestTheFloorPlan holds labctl's floor plan (docs/architecture.md): the
// engine imports no install mode, no shared step and no provider; the
// shared steps import no mode and no provider; a mode imports no other
// mode and no provider; of labctl's packages only the libvirt provider
// (internal/labvirt) talks libvirt (go-libvirt, or internal/virt, the BMC
// backend it shares libvirt's connection code with); and labctl links no
// BMC daemon (internal/vbmcd) and no Kubernetes package.
func TestTheFloorPlan(t *testing.T) {
	pkgs := packages(t, "cmd/labctl", "internal")
	const (
		engine   = module + "internal/lab"
		steps    = module + "internal/lab/steps"
		provider = module + "internal/labvirt"
	)
	isMode := func(p string) bool {
		return strings.HasPrefix(p, engine+"/") && strings.HasSuffix(p, "mode") && !strings.Contains(strings.TrimPrefix(p, engine+"/"), "/")
	}
	var modes []string
	for p := range pkgs {
		if isMode(p) {
			modes = append(modes, p)
		}
	}
	if len(modes) < 3 {
		t.Fatalf("found the modes %v, want ipimode, hybridmode and agentmode at least: the test no longer sees them", modes)
	}
	for im := range pkgs[engine] {
		if strings.HasPrefix(im, engine+"/") || im == provider || (strings.HasPrefix(im, module) && !slices.Contains([]string{module + "internal/plan", module + "internal/netaddr", module + "internal/netplumb"}, im)) {
			t.Errorf("the engine (internal/lab) imports %s: it knows the plan and its own types only; a mode, a step or a provider reaches it, not the other way", im)
		}
	}
	for im := range pkgs[steps] {
		if isMode(im) || im == provider {
			t.Errorf("the shared steps import %s: a mode asks for its rules through their hooks, and the platform is reached through the provider", im)
		}
	}
	for _, m := range modes {
		for im := range pkgs[m] {
			if (isMode(im) && im != m) || im == provider {
				t.Errorf("mode %s imports %s: a mode stands alone (what two modes share is a step's)", m, im)
			}
		}
	}
	// labctl's packages: what cmd/labctl reaches.
	reach := map[string]bool{}
	var walk func(p string)
	walk = func(p string) {
		if reach[p] {
			return
		}
		reach[p] = true
		for im := range pkgs[p] {
			if strings.HasPrefix(im, module) {
				walk(im)
			}
		}
	}
	walk(module + "cmd/labctl")
	if !reach[provider] || !reach[engine] {
		t.Fatalf("cmd/labctl reaches %d packages, not the engine and the provider: the test no longer sees labctl", len(reach))
	}
	for p := range reach {
		if p == module+"internal/virt" || p == module+"internal/virt/domain" {
			continue // the BMC backend, whose dialer and errors the provider shares; the servers' domains, which it defines nodes with
		}
		for im := range pkgs[p] {
			switch {
			case p != provider && (im == "github.com/digitalocean/go-libvirt" || im == module+"internal/virt"):
				t.Errorf("%s imports %s: only the libvirt provider (internal/labvirt) talks libvirt", p, im)
			case im == module+"internal/vbmcd":
				t.Errorf("%s imports internal/vbmcd: labctl starts vbmcd as a process, it does not link it", p)
			case strings.HasPrefix(im, "k8s.io/") || strings.Contains(im, ".k8s.io/"):
				t.Errorf("%s imports %s: labctl links no Kubernetes package", p, im)
			}
		}
	}
}
