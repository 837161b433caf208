package lab_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/bmlab/bmlab/internal/personality"
	"github.com/bmlab/bmlab/internal/plan/plantest"
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
// backend it shares libvirt's connection code with); labctl links no
// BMC daemon (internal/vbmcd) and no Kubernetes package; and vbmcd's
// listeners (internal/listen) stand below vbmcd, clear of labctl.
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
		if im == "syscall" || im == module+"internal/qemuaccess" {
			t.Errorf("the shared steps import %s: what the host offers is the provider's answer (lab.Provider.Info)", im)
		}
		if im == "net/http" {
			t.Errorf("the shared steps import net/http: an image is downloaded by the provider (lab.Provider.Fetch)")
		}
	}
	// The provider answers for the host: the shared steps run no program
	// on it (qemu-img is lab.Provider.Image; remote.go runs labctl on the
	// lab's other hosts, the Runner) and write none of its files
	// (NetworkManager's snippet, the resolver drop-in: lab.Unmanaged,
	// lab.ResolverDropIn).
	for _, use := range hostReaches(t, "steps") {
		t.Errorf("%s: the shared steps reach the host around the provider; declare an object (or ask lab.Provider) and let the provider do it", use)
	}
	for _, m := range modes {
		for im := range pkgs[m] {
			if (isMode(im) && im != m) || im == provider {
				t.Errorf("mode %s imports %s: a mode stands alone (what two modes share is a step's)", m, im)
			}
		}
	}
	// The plan and the lab file are neutral: they speak the install
	// vocabulary (internal/ocp) and reach no installer's generator; the
	// adapters to those are the modes' and the installer step's.
	for _, neutral := range []string{"internal/plan", "internal/labconfig"} {
		if pkgs[module+neutral] == nil {
			t.Fatalf("no package %s: the test no longer sees it", neutral)
		}
		for p := range reachable(pkgs, module+neutral) {
			for _, installer := range []string{"internal/ipi", "internal/agent", "internal/upi"} {
				if pkgs[p][module+installer] {
					t.Errorf("%s reaches %s through %s: the plan and the lab file import no installer; put the words both need in internal/ocp and the adapter in the mode or the installer step", neutral, installer, p)
				}
			}
		}
	}
	// The plan reads a mode's traits, never its name: it spells no
	// mode's name (each mode declares its own, as ipimode.Name; a fourth
	// mode resolves without an edit to the plan: internal/lab/modes'
	// TestAFourthModeResolves).
	for _, use := range modeNameUses(t, filepath.Join("..", "plan")) {
		t.Errorf("%s: the plan names a mode; give the mode a trait (plan.Traits) and read that", use)
	}
	// What a vendor does differently is its personality's: no file
	// outside internal/personality names a vendor's manufacturer or a
	// vendor personality's Name constant (personality.ILO6), or compares
	// with a personality's name as a string ("ilo6") in an ==, != or a
	// switch's case.
	for _, use := range vendorNameUses(t) {
		t.Errorf("%s: a switch on a vendor's name outside internal/personality; give the personality a field (as VirtualMediaScheme, HPEOEM) and read that", use)
	}
	// vbmcd's listeners (internal/listen: the HTTP front, connection
	// limits, a BMC per address) stand below the command, which only
	// wires them, and above the faces; nothing of labctl's is in their
	// reach.
	const listen, vbmcd = module + "internal/listen", module + "internal/vbmcd"
	if !pkgs[vbmcd][listen] {
		t.Errorf("internal/vbmcd does not import internal/listen: the test no longer sees vbmcd's listeners")
	}
	for p := range reachable(pkgs, listen) {
		for _, up := range []string{vbmcd, engine, provider, module + "internal/plan", module + "internal/labconfig", module + "internal/labctl"} {
			if p == up || strings.HasPrefix(p, up+"/") {
				t.Errorf("internal/listen reaches %s: vbmcd's listeners import nothing above them and nothing of labctl's", p)
			}
		}
	}
	// labctl's packages: what cmd/labctl reaches.
	reach := reachable(pkgs, module+"cmd/labctl")
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

// hostReaches are the places in dir's non-test files that run a program
// (exec.Command, but in remote.go), call netplumb's functions that read or
// write the host's files, or name a directory of the host's network
// configuration.
func hostReaches(t *testing.T, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	fileFuncs := map[string]bool{"NetworkManagerPresent": true, "WriteUnmanagedSnippet": true, "UnmanagedSnippetCurrent": true,
		"RemoveUnmanagedSnippet": true, "UnmanagedSnippetOwner": true, "RemoveResolverDropIn": true, "ResolverDropInOwner": true}
	var out []string
	inspectSources(t, files, func(fset *token.FileSet, f string, n ast.Node) {
		switch n := n.(type) {
		case *ast.SelectorExpr:
			x, ok := n.X.(*ast.Ident)
			switch {
			case !ok:
			case x.Name == "exec" && strings.HasPrefix(n.Sel.Name, "Command") && filepath.Base(f) != "remote.go":
				out = append(out, fmt.Sprintf("%s: exec.%s", fset.Position(n.Pos()), n.Sel.Name))
			case x.Name == "netplumb" && fileFuncs[n.Sel.Name]:
				out = append(out, fmt.Sprintf("%s: netplumb.%s", fset.Position(n.Pos()), n.Sel.Name))
			}
		case *ast.BasicLit:
			if v, err := strconv.Unquote(n.Value); n.Kind == token.STRING && err == nil && (strings.Contains(v, "/etc/NetworkManager") || strings.Contains(v, "/etc/systemd")) {
				out = append(out, fmt.Sprintf("%s: %q", fset.Position(n.Pos()), v))
			}
		}
	})
	return out
}

// reachable is the set of the repository's packages that from reaches
// (from included), through pkgs' imports.
func reachable(pkgs map[string]map[string]bool, from string) map[string]bool {
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
	walk(from)
	return reach
}

// modeNameUses are the string literals in dir's non-test files that spell
// a mode's name (plantest/modes.json, which internal/lab/modes checks
// against the modes).
func modeNameUses(t *testing.T, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no Go files in %s: %v", dir, err)
	}
	names := map[string]bool{}
	for _, m := range plantest.Modes() {
		names[m.Name] = true
	}
	if len(names) < 3 {
		t.Fatalf("plantest names the modes %v: the test no longer sees them", names)
	}
	var out []string
	inspectSources(t, files, func(fset *token.FileSet, _ string, n ast.Node) {
		if l, ok := n.(*ast.BasicLit); ok && l.Kind == token.STRING {
			if v, err := strconv.Unquote(l.Value); err == nil && names[v] {
				out = append(out, fmt.Sprintf("%s: %s", fset.Position(l.Pos()), l.Value))
			}
		}
	})
	return out
}

// inspectSources parses the non-test files among files and calls visit
// with each node of each.
func inspectSources(t *testing.T, files []string, visit func(fset *token.FileSet, file string, n ast.Node)) {
	t.Helper()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		fset := token.NewFileSet()
		af, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(af, func(n ast.Node) bool {
			visit(fset, f, n)
			return true
		})
	}
}

// vendorNameUses are the places, in the repository's non-test Go files
// outside internal/personality, that spell a vendor personality's
// Manufacturer or name a vendor personality's Name constant, or compare
// (==, !=, a case) with a personality's name as a string.
func vendorNameUses(t *testing.T) []string {
	t.Helper()
	vendors, names := map[string]bool{}, map[string]bool{}
	for _, n := range personality.Names() {
		names[strconv.Quote(n)] = true
		if p, err := personality.Lookup(n); err == nil && !p.Generic() {
			vendors[strconv.Quote(p.Manufacturer)] = true
		}
	}
	consts := personalityNameConsts(t)
	if len(vendors) < 3 || len(consts) < 4 {
		t.Fatalf("vendors %v, name constants %v: the test no longer sees the personalities", vendors, consts)
	}
	isName := func(e ast.Expr) bool {
		l, ok := e.(*ast.BasicLit)
		return ok && l.Kind == token.STRING && names[l.Value]
	}
	root := filepath.Join("..", "..")
	var out []string
	for _, top := range []string{"cmd", "internal"} {
		err := filepath.WalkDir(filepath.Join(root, top), func(path string, d os.DirEntry, err error) error {
			switch {
			case err != nil:
				return err
			case d.IsDir() && (d.Name() == "testdata" || path == filepath.Join(root, "internal", "personality")):
				return filepath.SkipDir
			case d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go"):
				return nil
			}
			fset := token.NewFileSet()
			af, err := parser.ParseFile(fset, path, nil, 0)
			if err != nil {
				return err
			}
			ast.Inspect(af, func(n ast.Node) bool {
				var compared []ast.Expr
				switch n := n.(type) {
				case *ast.BasicLit:
					if n.Kind == token.STRING && vendors[n.Value] {
						out = append(out, fmt.Sprintf("%s: %s", fset.Position(n.Pos()), n.Value))
					}
				case *ast.SelectorExpr:
					if pkg, ok := n.X.(*ast.Ident); ok && pkg.Name == "personality" && consts[n.Sel.Name] {
						out = append(out, fmt.Sprintf("%s: names the vendor personality %s", fset.Position(n.Pos()), types.ExprString(n)))
					}
				case *ast.BinaryExpr:
					if n.Op == token.EQL || n.Op == token.NEQ {
						compared = []ast.Expr{n.X, n.Y}
					}
				case *ast.CaseClause:
					compared = n.List
				}
				for _, e := range compared {
					if isName(e) {
						out = append(out, fmt.Sprintf("%s: compares with personality name %s", fset.Position(e.Pos()), types.ExprString(e)))
					}
				}
				return true
			})
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// personalityNameConsts are the identifiers internal/personality declares
// as constants of its Name type for a vendor (IDRAC9, ILO6, ...: not
// Generic, which is no vendor's).
func personalityNameConsts(t *testing.T) map[string]bool {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("..", "personality", "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(token.NewFileSet(), f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(af, func(n ast.Node) bool {
			if vs, ok := n.(*ast.ValueSpec); ok {
				if typ, ok := vs.Type.(*ast.Ident); ok && typ.Name == "Name" {
					for i, id := range vs.Names {
						if l, ok := vs.Values[i].(*ast.BasicLit); ok {
							if v, err := strconv.Unquote(l.Value); err == nil {
								if p, err := personality.Lookup(v); err == nil && !p.Generic() {
									out[id.Name] = true
								}
							}
						}
					}
				}
			}
			return true
		})
	}
	return out
}
