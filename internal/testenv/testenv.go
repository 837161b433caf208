package testenv

import (
	"io"
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

// Kernel skips the test when the running kernel lacks a feature (ok false),
// under CI too: no script of the project can add a feature to a kernel that
// was built without it (CI here runs on a micro-VM kernel without modules).
// Unlike Require, which is for what hack/install-deps.sh and
// hack/start-libvirtd.sh provide, this never hides a missing install step.
func Kernel(t testing.TB, ok bool, feature string) {
	t.Helper()
	if !ok {
		t.Skipf("SKIP (kernel): this kernel lacks %s; the test runs where the kernel has it", feature)
	}
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
	imgMu   sync.Mutex
	imgErrs = map[string]error{}
)

// RepoRoot returns the repository's top directory.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// MarkerISO returns the path of the boot-marker ISO, which prints Marker on
// the serial console and powers the VM off. It is built once with
// hack/build-marker-iso.sh under testdata/iso, which qemu can read.
func MarkerISO(t testing.TB) string { return markerImage(t, "marker.iso", Marker, "halt") }

// MarkerISOWith returns a boot-marker ISO named name (under testdata/iso)
// that prints marker instead of Marker and powers the VM off: two of them
// tell which of two images a VM booted.
func MarkerISOWith(t testing.TB, name, marker string) string {
	return markerImage(t, name, marker, "halt")
}

// MarkerDisk returns a bootable image that prints DiskMarker instead and
// then stays at grub's prompt: attached as a disk (format raw) it shows that a
// VM booted its disk, not its CD, and leaves the VM running. Attach a copy
// (CopyFile) when the VM may write to it.
func MarkerDisk(t testing.TB) string { return markerImage(t, "disk-marker.img", DiskMarker, "stay") }

// MarkerEFI returns the path of the boot-marker EFI application (a
// standalone GRUB for x86_64 UEFI, built with hack/build-marker-efi.sh),
// which prints EFIMarker on the serial console and powers the VM off.
func MarkerEFI(t testing.TB) string {
	return buildImage(t, "marker.efi", "build-marker-efi.sh", EFIMarker, "halt")
}

// EFIMarker is the line MarkerEFI prints.
const EFIMarker = "BMLAB-EFI-BOOTED"

// MarkerISOArm64 returns an aarch64-only boot-marker ISO (grub for
// arm64-efi, hack/build-marker-iso.sh's arm64): it prints Marker on the
// serial console of an aarch64 UEFI machine and powers it off, and no x86
// machine boots it.
func MarkerISOArm64(t testing.TB) string {
	t.Helper()
	return buildImage(t, "marker-arm64.iso", "build-marker-iso.sh", Marker, "halt", "arm64")
}

// MarkerDiskArm64 is MarkerDisk for an aarch64 machine: it prints
// DiskMarker and stays at grub's prompt.
func MarkerDiskArm64(t testing.TB) string {
	t.Helper()
	return buildImage(t, "disk-marker-arm64.img", "build-marker-iso.sh", DiskMarker, "stay", "arm64")
}

func markerImage(t testing.TB, name, marker, after string) string {
	t.Helper()
	return buildImage(t, name, "build-marker-iso.sh", marker, after)
}

func buildImage(t testing.TB, name, script, marker, after string, more ...string) string {
	t.Helper()
	Integration(t)
	imgMu.Lock()
	defer imgMu.Unlock()
	root := RepoRoot()
	p := filepath.Join(root, "testdata", "iso", name)
	err, done := imgErrs[name]
	if !done {
		if _, serr := os.Stat(p); serr != nil {
			if err = os.MkdirAll(filepath.Dir(p), 0o755); err == nil {
				out, berr := exec.Command("bash", append([]string{filepath.Join(root, "hack", script), p, marker, after}, more...)...).CombinedOutput()
				if berr != nil {
					err = &buildError{out: string(out), err: berr}
				}
			}
		}
		imgErrs[name] = err
	}
	Require(t, err == nil, "the marker image "+name+" (hack/"+script+"): "+errString(err))
	return p
}

// DiskMarker is the line MarkerDisk prints.
const DiskMarker = "BMLAB-DISK-BOOTED"

// OSImage returns the OS image the Ironic tests deploy with the real agent
// (hack/build-os-image.sh, under testdata/iso): a raw whole-disk image
// with a GPT, an EFI system partition whose GRUB prints OSMarker and then
// the release line of its second, ext4 partition (OSRelease), and stays
// at its prompt.
func OSImage(t testing.TB) string {
	return buildImage(t, "os-disk.img", "build-os-image.sh", OSMarker, "")
}

// OSMarker is the line OSImage prints when a machine boots it.
const OSMarker = "BMLAB-OS-BOOTED"

// OSRelease begins the line OSImage prints from its second partition.
const OSRelease = "BMLAB-OS-RELEASE "

// QemuDir returns a fresh directory that qemu (which may run as an
// unprivileged user) can traverse and write, removed when the test ends.
func QemuDir(t testing.TB) string {
	t.Helper()
	return TmpDir(t, "bmlab-qemu-", 0o777)
}

// TmpDir is a fresh directory directly under /tmp (named prefix and a
// random tail) with the given mode, removed when the test ends: unlike
// t.TempDir's, its parents let other users (qemu) reach it.
func TmpDir(t testing.TB, prefix string, mode os.FileMode) string {
	t.Helper()
	d, err := os.MkdirTemp("", prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	if err := os.Chmod(d, mode); err != nil {
		t.Fatal(err)
	}
	return d
}

// ReadFile is the file at path as a string; a file that cannot be read
// fails the test.
func ReadFile(t testing.TB, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// CopyFile copies src to dst (mode 0666 so qemu may write it), streaming:
// the files are disk images and ramdisks of hundreds of MB.
func CopyFile(t testing.TB, src, dst string) {
	t.Helper()
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o666)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}

// Count returns how often marker occurs in the file at path (0 when the
// file does not exist yet).
func Count(path, marker string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	return strings.Count(string(b), marker)
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

// countAcross counts text in what was read, b, after the carry of the read
// before, and returns the carry for the next: the end of what was read that
// could begin a text cut in two (shorter than text, after its last whole
// occurrence).
func countAcross(carry string, b []byte, text string) (int, string) {
	chunk := carry + string(b)
	c := strings.Count(chunk, text)
	if c > 0 {
		chunk = chunk[strings.LastIndex(chunk, text)+len(text):]
	}
	return c, chunk[max(0, len(chunk)-len(text)+1):]
}

// WatchLines follows the file at path (a serial log, say) until the test
// ends, reading what was added every 100 ms, and records the time each
// occurrence of text first showed: when was read, in order. A figure taken
// from it is as good as that polling (0.1 s) and the writer's flushing.
func WatchLines(t testing.TB, path, text string) (seen func() []time.Time) {
	var mu sync.Mutex
	var times []time.Time
	done := make(chan struct{})
	stopped := make(chan struct{})
	t.Cleanup(func() { close(done); <-stopped })
	go func() {
		defer close(stopped)
		var off int64
		var carry string // the end of what was read, for a text cut in two
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			if f, err := os.Open(path); err == nil {
				if st, err := f.Stat(); err == nil && st.Size() > off {
					b := make([]byte, st.Size()-off)
					n, _ := f.ReadAt(b, off)
					off += int64(n)
					var c int
					c, carry = countAcross(carry, b[:n], text)
					if c > 0 {
						now := time.Now()
						mu.Lock()
						for range c {
							times = append(times, now)
						}
						mu.Unlock()
					}
				}
				f.Close()
			}
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()
	return func() []time.Time {
		mu.Lock()
		defer mu.Unlock()
		return append([]time.Time(nil), times...)
	}
}
