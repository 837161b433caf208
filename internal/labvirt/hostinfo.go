package labvirt

import (
	"bufio"
	"context"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"

	"github.com/bmlab/bmlab/internal/lab"
)

// Info implements lab.Provider: the machine labctl runs on, which is the
// lab's hub (its libvirtd is local): /dev/kvm, /proc/meminfo, its CPUs
// and the space free in dir's file system.
func (r *Host) Info(_ context.Context, dir string) (lab.HostInfo, error) {
	return localInfo(dir), nil
}

// Info implements lab.Provider: the hub's (the preflight weighs the whole
// lab against it, as before the hosts were several).
func (m *MultiHost) Info(ctx context.Context, dir string) (lab.HostInfo, error) {
	return m.hub.Info(ctx, dir)
}

// localInfo is what this machine offers.
func localInfo(dir string) lab.HostInfo {
	_, err := os.Stat("/dev/kvm")
	info := lab.HostInfo{KVM: err == nil, Arch: runtime.GOARCH, CPUs: runtime.NumCPU(), MemoryMiB: memTotalMiB()}
	var fs syscall.Statfs_t
	if err := syscall.Statfs(dir, &fs); err == nil {
		info.FreeGiB, info.FreeKnown = fs.Bavail*uint64(fs.Bsize)>>30, true
	}
	return info
}

// memTotalMiB is /proc/meminfo's MemTotal (0: unknown).
func memTotalMiB() uint {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && fields[0] == "MemTotal:" {
			kib, _ := strconv.ParseUint(fields[1], 10, 64)
			return uint(kib / 1024)
		}
	}
	return 0
}
