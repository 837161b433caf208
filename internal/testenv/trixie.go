package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// Ironic 29's root: the Debian 13 (trixie) root hack/build-ironic-root.sh
// builds into the tool cache and links as _out/tools/ironic-29/root. Besides
// Ironic 29 it holds the vendors' libraries Debian 12 lacks or has older:
// python3-sushy 5.5.0, python3-sushy-oem-idrac 5.0.0 and
// python3-proliantutils 2.16.3. A command runs there in a private mount
// namespace whose / is the root, read-only, with the host's /tmp, /dev and
// /sys and a /proc of its own: a file a test writes under /tmp (a CA, a
// script's input) has the same path inside.

// Ironic29Root is where hack/build-ironic-root.sh links the root.
func Ironic29Root() string {
	return filepath.Join(RepoRoot(), "_out", "tools", "ironic-29", "root")
}

// enterRoot makes $1 the / of a private mount namespace (unshare --mount),
// with an empty tmpfs at each of the $2 directories after it, and runs the
// rest of the arguments there.
const enterRoot = `set -e
r=$1; n=$2; shift 2
mount --bind "$r" "$r"
mount -o remount,bind,ro "$r"
mount -t proc proc "$r/proc"
mount --rbind /sys "$r/sys"
mount --rbind /dev "$r/dev"
mount --rbind /tmp "$r/tmp"
mount -t tmpfs -o mode=0755 tmpfs "$r/run"
mount -t tmpfs -o mode=1777 tmpfs "$r/var/tmp"
while [ "$n" -gt 0 ]; do mount -t tmpfs -o mode=0755 tmpfs "$r$1"; shift; n=$((n-1)); done
exec chroot "$r" "$@"`

// InRoot is how to run argv (a command of the root, by its path inside it)
// in root.
func InRoot(root string, argv ...string) []string {
	return InRootWith(root, nil, argv...)
}

// InRootWith is InRoot with an empty, writable tmpfs at each of dirs
// (paths inside the root, which must exist there): the state a command
// keeps, which the read-only root cannot hold.
func InRootWith(root string, dirs []string, argv ...string) []string {
	out := []string{"unshare", "--mount", "--propagation", "private", "--", "/bin/sh", "-c", enterRoot, "sh", root, strconv.Itoa(len(dirs))}
	out = append(out, dirs...)
	return append(out, argv...)
}

// RootPython runs the root's /usr/bin/python3 with the vendor overlay
// (VendorOverlay) first on its PYTHONPATH.
type RootPython struct {
	root  string
	pylib string
}

// Python29 requires Ironic 29's root with the given modules importable
// through the vendor overlay, and returns its Python; it needs root
// (unshare, chroot). Without them the test skips, and fails under CI=true.
func Python29(t testing.TB, modules ...string) *RootPython {
	t.Helper()
	Root(t)
	root := Ironic29Root()
	_, err := os.Stat(filepath.Join(root, "usr", "bin", "python3"))
	Require(t, err == nil, "Ironic 29's trixie root at "+root+" (bash hack/build-ironic-root.sh)")
	Command(t, "unshare")
	Command(t, "chroot")
	dir, err := os.MkdirTemp("/tmp", "bmlab-pylib-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := VendorOverlay(root, dir); err != nil {
		t.Fatalf("testenv: the vendor overlay: %v", err)
	}
	p := &RootPython{root: root, pylib: dir}
	for _, m := range modules {
		out, err := p.Command("-c", "import "+m).CombinedOutput()
		Require(t, err == nil, fmt.Sprintf("python module %s in %s (%v: %s)", m, root, err, strings.TrimSpace(string(out))))
	}
	return p
}

// Dir is a directory under /tmp the root sees at the same path, removed
// when the test ends: for the files a script reads (a CA, its input).
func (p *RootPython) Dir() string { return p.pylib }

// Script copies the script at path (the repository is not inside the root)
// into Dir and returns the copy's path.
func (p *RootPython) Script(t testing.TB, path string) string {
	t.Helper()
	dst := filepath.Join(p.pylib, filepath.Base(path))
	CopyFile(t, path, dst)
	return dst
}

// Command is the root's python3 with args; its environment is the test's,
// with the overlay as PYTHONPATH.
func (p *RootPython) Command(args ...string) *exec.Cmd {
	argv := InRoot(p.root, append([]string{"/usr/bin/python3"}, args...)...)
	cmd := exec.Command(argv[0], argv[1:]...)
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PYTHONPATH=") {
			env = append(env, kv)
		}
	}
	cmd.Env = append(env, "PYTHONPATH="+p.pylib)
	return cmd
}

// oemIdracMissing are the modules Debian's python3-sushy-oem-idrac 5.0.0-2
// star-imports in its __init__.py and does not ship; without them the
// package does not import (ModuleNotFoundError: No module named
// 'sushy_oem_idrac.resources.system'), and sushy finds no Dell extension.
// Nothing of the manager's code (resources/manager, the extension Ironic's
// idrac hardware type loads) refers to a name from them, so they are
// supplied empty: none of the package's logic is written here.
var oemIdracMissing = []string{
	"resources/system/__init__.py",
	"resources/system/constants.py",
	"resources/system/storage/__init__.py",
	"resources/system/storage/constants.py",
	"resources/taskservice/__init__.py",
	"resources/taskservice/constants.py",
}

// VendorOverlay makes dir/sushy_oem_idrac a copy of the root's
// sushy_oem_idrac package made of links to its files (named as the root
// sees them), plus the modules it lacks (oemIdracMissing), empty. With dir
// first on PYTHONPATH, Python imports the package from there, and its
// entry points (sushy.resources.manager.oems: dell) load Debian's manager
// code; Debian's files stay as the package installed them.
func VendorOverlay(root, dir string) error {
	const pkg = "/usr/lib/python3/dist-packages/sushy_oem_idrac"
	dst := filepath.Join(dir, "sushy_oem_idrac")
	for _, sub := range []string{"", "resources"} {
		entries, err := os.ReadDir(filepath.Join(root, pkg, sub))
		if err != nil {
			return fmt.Errorf("python3-sushy-oem-idrac in %s: %w", root, err)
		}
		if err := os.MkdirAll(filepath.Join(dst, sub), 0o755); err != nil {
			return err
		}
		for _, e := range entries {
			if e.Name() == "__pycache__" || (sub == "" && e.Name() == "resources") {
				continue
			}
			if err := os.Symlink(filepath.Join(pkg, sub, e.Name()), filepath.Join(dst, sub, e.Name())); err != nil {
				return err
			}
		}
	}
	for _, m := range oemIdracMissing {
		p := filepath.Join(dst, m)
		if _, err := os.Stat(filepath.Join(root, pkg, m)); err == nil {
			return fmt.Errorf("python3-sushy-oem-idrac in %s ships %s now: drop it from the overlay", root, m)
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		doc := "# Supplied empty by bmlab's test overlay (internal/testenv/trixie.go): Debian's\n" +
			"# python3-sushy-oem-idrac 5.0.0-2 imports this module and does not ship it.\n"
		if err := os.WriteFile(p, []byte(doc), 0o644); err != nil {
			return err
		}
	}
	return nil
}
