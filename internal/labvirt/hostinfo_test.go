package labvirt

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// TestLocalInfo: the hub's answer is this machine's: its CPUs, a memory
// total from /proc/meminfo, KVM as /dev/kvm is there or not, the space
// free in a directory's file system, and no free-space figure for a
// directory that is not there; qemu's user reaches a directory below
// 0755 ones and not one below a 0700 one (ErrNotTraversable).
func TestLocalInfo(t *testing.T) {
	dir := t.TempDir()
	info := localInfo(dir)
	_, err := os.Stat("/dev/kvm")
	if info.CPUs != runtime.NumCPU() || info.Arch != runtime.GOARCH || info.KVM != (err == nil) || info.MemoryMiB < 256 || !info.FreeKnown {
		t.Errorf("localInfo(%s) = %+v", dir, info)
	}
	if gone := localInfo(filepath.Join(dir, "gone")); gone.FreeKnown {
		t.Errorf("a directory that is not there: %+v", gone)
	}
	open, closed := filepath.Join(dir, "open", "images"), filepath.Join(dir, "closed", "images")
	for _, d := range []string{open, closed} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(filepath.Dir(closed), 0o700); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{dir, filepath.Dir(dir)} { // t.TempDir's are 0700
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if info := localInfo(open); info.Unreachable != nil {
		t.Errorf("%s: %v, want qemu to reach it", open, info.Unreachable)
	}
	if info := localInfo(closed); !errors.Is(info.Unreachable, ErrNotTraversable) {
		t.Errorf("%s: %v, want %v", closed, info.Unreachable, ErrNotTraversable)
	}
}
