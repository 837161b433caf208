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
	"github.com/bmlab/bmlab/internal/qemuaccess"
)

// Info implements lab.Provider: the machine labctl runs on, which is the
// lab's hub (its libvirtd is local): /dev/kvm, /proc/meminfo, its CPUs,
// the space free in dir's file system and whether qemu's user can enter
// every directory down to dir.
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
	info.Unreachable = qemuCanReach(dir)
	return info
}

// qemuCanReach checks that qemu, which runs as an unprivileged user
// (libvirt-qemu on Debian, or qemu.conf's), can enter every directory down
// to dir: the classic "permission denied" when disks live in a home
// directory. One check for labctl and vbmcd: internal/qemuaccess.
func qemuCanReach(dir string) error {
	u, err := qemuaccess.Lookup("")
	if err != nil {
		return err
	}
	return u.CanTraverse(dir)
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
