package testenv

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// CI reports whether the tests run under CI (CI=true), where every
// prerequisite must be present.
func CI() bool {
	v := strings.ToLower(os.Getenv("CI"))
	return v == "true" || v == "1" || v == "yes"
}

// Require skips the test when ok is false, or fails it under CI.
func Require(t testing.TB, ok bool, what string) {
	t.Helper()
	if ok {
		return
	}
	if CI() {
		t.Fatalf("prerequisite missing under CI: %s", what)
	}
	t.Skipf("prerequisite missing: %s (set CI=true to make this a failure)", what)
}

// Integration marks a test as an integration test: -short skips it even
// under CI (the `make unit` target), otherwise it runs.
func Integration(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test; -short given")
	}
}

// Root requires the tests to run as root (network namespaces, bridges).
func Root(t testing.TB) {
	t.Helper()
	Integration(t)
	Require(t, os.Geteuid() == 0, "root (network namespaces and libvirt need it)")
}

// Command requires a binary on PATH and returns its path.
func Command(t testing.TB, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	Require(t, err == nil, "command "+name+" on PATH (hack/install-deps.sh installs it)")
	return p
}

// LibvirtSocket is the socket of the system libvirtd.
const LibvirtSocket = "/var/run/libvirt/libvirt-sock"

// Libvirt requires a running libvirtd reachable on its unix socket and returns
// the socket path.
func Libvirt(t testing.TB) string {
	t.Helper()
	Root(t)
	c, err := net.DialTimeout("unix", LibvirtSocket, time.Second)
	if err == nil {
		c.Close()
	}
	Require(t, err == nil, "libvirtd on "+LibvirtSocket+" (hack/start-libvirtd.sh starts it)")
	return LibvirtSocket
}

// Python requires Debian's python3 with the given modules importable and
// returns its path. The python3 first on PATH may be a pyenv build that cannot
// see Debian's packages, so this always uses /usr/bin/python3.
func Python(t testing.TB, modules ...string) string {
	t.Helper()
	const py = "/usr/bin/python3"
	for _, m := range modules {
		err := exec.Command(py, "-c", "import "+m).Run()
		Require(t, err == nil, "python module "+m+" for "+py+" (hack/install-deps.sh installs it)")
	}
	return py
}

var (
	isoOnce sync.Once
	isoPath string
	isoErr  error
)

// RepoRoot returns the repository's top directory.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// MarkerISO returns the path of the boot-marker ISO, building it once with
// hack/build-marker-iso.sh when it is not there yet. Its marker line is
// Marker. The file lives under testdata/iso, which qemu can read.
func MarkerISO(t testing.TB) string {
	t.Helper()
	Integration(t)
	isoOnce.Do(func() {
		root := RepoRoot()
		isoPath = filepath.Join(root, "testdata", "iso", "marker.iso")
		if _, err := os.Stat(isoPath); err == nil {
			return
		}
		if err := os.MkdirAll(filepath.Dir(isoPath), 0o755); err != nil {
			isoErr = err
			return
		}
		out, err := exec.Command("bash", filepath.Join(root, "hack", "build-marker-iso.sh"), isoPath, Marker).CombinedOutput()
		if err != nil {
			isoErr = &buildError{out: string(out), err: err}
		}
	})
	Require(t, isoErr == nil, "the marker ISO (grub-mkrescue): "+errString(isoErr))
	return isoPath
}

// Marker is the line the marker ISO prints on the serial console.
const Marker = "BMLAB-MARKER-BOOTED"

type buildError struct {
	out string
	err error
}

func (e *buildError) Error() string { return e.err.Error() + ": " + e.out }

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// WaitFor polls cond every 50 ms until it returns true or the timeout passes.
func WaitFor(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
}
