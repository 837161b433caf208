package installertest

import (
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/bmlab/bmlab/internal/testenv"
)

var (
	buildMu   sync.Mutex
	buildPath string
)

// Installer builds the fixture (once per test process) and returns the
// path of a binary named openshift-install.
func Installer(t testing.TB) string {
	t.Helper()
	testenv.Command(t, "go")
	buildMu.Lock()
	defer buildMu.Unlock()
	if buildPath != "" {
		return buildPath
	}
	dir, err := os.MkdirTemp("", "bmlab-fakeinstaller-")
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "openshift-install")
	pkg := filepath.Join(testenv.RepoRoot(), "internal", "installertest", "fakeinstaller")
	if out, err := exec.Command("go", "build", "-o", p, pkg).CombinedOutput(); err != nil {
		t.Fatalf("build the fixture openshift-install: %v\n%s", err, out)
	}
	buildPath = p
	return p
}

// OC returns the fixture run as oc (the same binary, named oc).
func OC(t testing.TB) string {
	t.Helper()
	inst := Installer(t)
	p := filepath.Join(filepath.Dir(inst), "oc")
	if _, err := os.Stat(p); err != nil {
		if err := os.Link(inst, p); err != nil {
			t.Fatalf("the fixture oc: %v", err)
		}
	}
	return p
}
