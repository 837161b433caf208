package labvirt

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// TestLocalInfo: the hub's answer is this machine's: its CPUs, a memory
// total from /proc/meminfo, KVM as /dev/kvm is there or not, the space
// free in a directory's file system, and no free-space figure for a
// directory that is not there.
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
}
