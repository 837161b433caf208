// Package virttest gives integration tests a libvirt backend connected to
// the real libvirtd and throwaway VMs that boot the marker images. Only
// _test.go files import it.
package virttest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/digitalocean/go-libvirt"
	"libvirt.org/go/libvirtxml"

	"github.com/bmlab/bmlab/internal/machine"
	"github.com/bmlab/bmlab/internal/testenv"
	"github.com/bmlab/bmlab/internal/virt"
	"github.com/bmlab/bmlab/internal/virt/domain"
)

// Lab is a connected backend and the model over it.
type Lab struct {
	Backend *virt.Backend
	Service *machine.Service
	Client  *libvirt.Libvirt
	prefix  string
}

// New connects to the system libvirtd (or fails/skips per testenv rules).
// Domains whose names start with prefix are the test's; only they are
// served, and any left over from an earlier run are removed first.
func New(t testing.TB, prefix string) *Lab {
	t.Helper()
	testenv.Libvirt(t)
	return NewAt(t, "qemu:///system", prefix)
}

// NewAt is New for the libvirtd at uri (an Underlay's, say).
func NewAt(t testing.TB, uri, prefix string) *Lab {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	be, err := virt.New(virt.Config{URI: uri, Domains: []string{prefix + "*"}, Keepalive: time.Second, VarsDir: t.TempDir()}, testenv.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := be.Connect(ctx, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	l, err := be.Conn().Client()
	if err != nil {
		t.Fatal(err)
	}
	lab := &Lab{Backend: be, Client: l, prefix: prefix}
	lab.Service = machine.NewService(be, testenv.Logger(t))
	lab.Service.Watch(ctx)
	doms, _, err := l.ConnectListAllDomains(1, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range doms {
		if strings.HasPrefix(d.Name, prefix) {
			_ = domain.Delete(ctx, l, d.Name)
		}
	}
	return lab
}

// client is the backend's current connection: Client may be a closed one
// after the daemon restarted.
func (lab *Lab) client(t testing.TB) *libvirt.Libvirt {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := lab.Backend.Conn().WaitConnected(ctx); err != nil {
		t.Fatal(err)
	}
	l, err := lab.Backend.Conn().Client()
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// VM is a throwaway domain.
type VM struct {
	Name, ID  string
	SerialLog string
	// Disk is the path of its disk (raw), "" without one.
	Disk string
}

// VMOptions shape a test VM.
type VMOptions struct {
	UEFI bool
	// MemoryMiB is the VM's memory (default 128, 256 with UEFI). qemu
	// touches only what the guest uses.
	MemoryMiB int
	// Arch is x86_64 (default) or aarch64: an aarch64 VM is UEFI (AAVMF),
	// qemu's virt machine, and its CD and disk markers are the arm64 ones.
	Arch string
	// NoCD leaves the CD-ROM drive empty; by default it holds the marker ISO.
	NoCD bool
	// DiskMarker gives the VM a bootable disk that prints testenv.DiskMarker;
	// by default the VM has no disk at all.
	DiskMarker bool
	// Machine is q35 by default.
	Machine   string
	BootOrder []string
	// UUID is the domain's UUID; empty lets libvirt pick one.
	UUID string
	// NICModels gives the VM one NIC per model (virtio, e1000e ...) on
	// QEMU's user-mode network, with its link down: no host interface, and
	// nothing leaves the VM.
	NICModels []string
	// NICs are NICs on libvirt networks or bridges (domain.NIC),
	// before NICModels' ones.
	NICs []domain.NIC
	// Disk, when set, gives the VM a raw disk of DiskGiB (default 4, the
	// least ironic-python-agent takes for a root device), sparse, whose
	// start is a copy of this image (a whole-disk image with a partition
	// table). Not with DiskMarker.
	Disk    string
	DiskGiB int
	// Bridges gives the VM a virtio NIC on each of these bridges (in
	// libvirtd's namespace), its link up, after the NICs and before the
	// NICModels ones (without NICs, the first is the one os/boot's
	// network boots from).
	Bridges []string
	// NoNICROM leaves the Bridges NICs without qemu's option ROM (iPXE):
	// the firmware's own network stack boots them (OVMF's VirtioNetDxe and
	// PXE), as a server's NIC firmware does.
	NoNICROM bool
	// FWCfg are fw_cfg entries the firmware reads (libvirt's sysinfo
	// type fwcfg; names start with opt/): OVMF's
	// opt/org.tianocore/IPv4PXESupport "n", say, makes a node that network
	// boots over IPv6 only.
	FWCfg map[string]string
}

// NewVM defines a VM named prefix+name and removes it when the test ends.
func (lab *Lab) NewVM(t testing.TB, name string, o VMOptions) *VM {
	t.Helper()
	dir := testenv.QemuDir(t)
	spec := domain.Spec{
		Name:      lab.prefix + name,
		MemoryMiB: 128,
		VCPUs:     1,
		Machine:   o.Machine,
		UEFI:      o.UEFI,
		SerialLog: filepath.Join(dir, "serial.log"),
		BootOrder: o.BootOrder,
		UUID:      o.UUID,
	}
	iso, diskImage := testenv.MarkerISO, testenv.MarkerDisk
	if o.Arch == machine.ArchAArch64 {
		spec.Arch, spec.UEFI = o.Arch, true
		iso, diskImage = testenv.MarkerISOArm64, testenv.MarkerDiskArm64
	}
	if spec.UEFI {
		spec.MemoryMiB = 256
	}
	if o.MemoryMiB > 0 {
		spec.MemoryMiB = uint(o.MemoryMiB)
	}
	if !o.NoCD {
		spec.CDROM = iso(t)
	}
	var disk string
	switch {
	case o.DiskMarker:
		disk = filepath.Join(dir, "disk.img")
		testenv.CopyFile(t, diskImage(t), disk)
	case o.Disk != "":
		disk = filepath.Join(dir, "disk.img")
		testenv.CopyFile(t, o.Disk, disk)
		if err := os.Truncate(disk, int64(max(o.DiskGiB, 4))<<30); err != nil {
			t.Fatal(err)
		}
	}
	if disk != "" {
		spec.Disks = []domain.Disk{{Path: disk, Format: "raw"}}
	}
	spec.NICs = o.NICs
	ctx := context.Background()
	id, err := domain.Define(ctx, lab.client(t), spec, virt.DetectFirmware())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := domain.Delete(context.Background(), lab.client(t), spec.Name); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	if len(o.NICModels)+len(o.Bridges)+len(o.FWCfg) > 0 {
		lab.addNICs(t, spec.Name, o)
	}
	vm := &VM{Name: spec.Name, ID: id, SerialLog: spec.SerialLog, Disk: disk}
	nics := len(o.NICs) + len(o.Bridges) + len(o.NICModels)
	if !testenv.WaitFor(5*time.Second, func() bool {
		m, err := lab.Service.Get(id)
		return err == nil && len(m.NICs) == nics
	}) {
		t.Fatalf("the backend never saw domain %s with its %d NICs", spec.Name, nics)
	}
	return vm
}

// addNICs redefines a domain with a NIC on each of o's bridges, then
// user-mode NICs of o's models, their links down, and o's fw_cfg entries.
func (lab *Lab) addNICs(t testing.TB, name string, o VMOptions) {
	t.Helper()
	var def libvirtxml.Domain
	if err := def.Unmarshal(lab.LiveXML(t, name, libvirt.DomainXMLInactive)); err != nil {
		t.Fatal(err)
	}
	for _, br := range o.Bridges {
		in := libvirtxml.DomainInterface{
			Source: &libvirtxml.DomainInterfaceSource{Bridge: &libvirtxml.DomainInterfaceSourceBridge{Bridge: br}},
			Model:  &libvirtxml.DomainInterfaceModel{Type: "virtio"},
		}
		if o.NoNICROM {
			in.ROM = &libvirtxml.DomainROM{Enabled: "no"}
		}
		def.Devices.Interfaces = append(def.Devices.Interfaces, in)
	}
	if len(o.FWCfg) > 0 {
		fc := &libvirtxml.DomainSysInfoFWCfg{}
		names := make([]string, 0, len(o.FWCfg))
		for k := range o.FWCfg {
			names = append(names, k)
		}
		slices.Sort(names)
		for _, k := range names {
			fc.Entry = append(fc.Entry, libvirtxml.DomainSysInfoEntry{Name: k, Value: o.FWCfg[k]})
		}
		def.SysInfo = append(def.SysInfo, libvirtxml.DomainSysInfo{FWCfg: fc})
	}
	for _, model := range o.NICModels {
		def.Devices.Interfaces = append(def.Devices.Interfaces, libvirtxml.DomainInterface{
			Source: &libvirtxml.DomainInterfaceSource{User: &libvirtxml.DomainInterfaceSourceUser{}},
			Model:  &libvirtxml.DomainInterfaceModel{Type: model},
			Link:   &libvirtxml.DomainInterfaceLink{State: "down"},
		})
	}
	x, err := def.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lab.client(t).DomainDefineXML(x); err != nil {
		t.Fatalf("define %s with NICs: %v", name, err)
	}
}

// WaitMarker waits until marker appears in the VM's serial log more often
// than before, and returns the new count.
func (vm *VM) WaitMarker(t testing.TB, marker string, before int, timeout time.Duration) int {
	t.Helper()
	var n int
	if !testenv.WaitFor(timeout, func() bool { n = testenv.Count(vm.SerialLog, marker); return n > before }) {
		b, _ := os.ReadFile(vm.SerialLog)
		tail := string(b)
		if len(tail) > 600 {
			tail = tail[len(tail)-600:]
		}
		t.Fatalf("%s: marker %q did not appear within %s (count stays %d); serial log ends:\n%q", vm.Name, marker, timeout, before, tail)
	}
	return n
}

// Markers returns how often each marker appears in the serial log.
func (vm *VM) Markers() (cd, disk int) {
	return testenv.Count(vm.SerialLog, testenv.Marker), testenv.Count(vm.SerialLog, testenv.DiskMarker)
}

// WaitPower waits until the model reports the power state.
func (lab *Lab) WaitPower(t testing.TB, id string, want machine.PowerState, timeout time.Duration) {
	t.Helper()
	var got machine.PowerState
	ok := testenv.WaitFor(timeout, func() bool {
		m, err := lab.Service.Get(id)
		if err != nil {
			return false
		}
		got = m.Power
		return got == want
	})
	if !ok {
		t.Fatalf("%s: power %s, want %s after %s", id, got, want, timeout)
	}
}

// DomainState asks libvirt directly (not the cache) for a domain's state.
func (lab *Lab) DomainState(t testing.TB, name string) libvirt.DomainState {
	t.Helper()
	l := lab.client(t)
	d, err := l.DomainLookupByName(name)
	if err != nil {
		t.Fatal(err)
	}
	st, _, err := l.DomainGetState(d, 0)
	if err != nil {
		t.Fatal(err)
	}
	return libvirt.DomainState(st)
}

// LiveXML returns a domain's live XML straight from libvirt.
func (lab *Lab) LiveXML(t testing.TB, name string, flags libvirt.DomainXMLFlags) string {
	t.Helper()
	d, err := lab.Client.DomainLookupByName(name)
	if err != nil {
		t.Fatal(err)
	}
	x, err := lab.Client.DomainGetXMLDesc(d, flags)
	if err != nil {
		t.Fatal(fmt.Errorf("dumpxml %s: %w", name, err))
	}
	return x
}

// DirectBoot redefines a VM to boot kernel with initrd and the kernel
// command line cmdline (qemu's direct kernel boot, no firmware menu), as a
// deploy ramdisk is booted without an ISO. qemu must be able to read both
// files.
func (lab *Lab) DirectBoot(t testing.TB, vm *VM, kernel, initrd, cmdline string) {
	t.Helper()
	var def libvirtxml.Domain
	if err := def.Unmarshal(lab.LiveXML(t, vm.Name, libvirt.DomainXMLInactive)); err != nil {
		t.Fatal(err)
	}
	def.OS.Kernel, def.OS.Initrd, def.OS.Cmdline = kernel, initrd, cmdline
	x, err := def.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lab.Client.DomainDefineXML(x); err != nil {
		t.Fatalf("define %s with a kernel to boot: %v", vm.Name, err)
	}
}

// RemoveGraphics redefines a VM without the display labvirt gives every
// domain (and its video device), as a domain defined by other tools may
// be: vbmcd's start gives it one again.
func (lab *Lab) RemoveGraphics(t testing.TB, vm *VM) {
	t.Helper()
	var def libvirtxml.Domain
	if err := def.Unmarshal(lab.LiveXML(t, vm.Name, libvirt.DomainXMLInactive)); err != nil {
		t.Fatal(err)
	}
	def.Devices.Graphics, def.Devices.Videos = nil, nil
	x, err := def.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lab.Client.DomainDefineXML(x); err != nil {
		t.Fatal(err)
	}
}

// RemoveCD redefines a VM without the CD drive labvirt gives every domain,
// as a domain defined by other tools may be, and waits until the backend
// sees it so. A SCSI controller left without disks goes too (an aarch64
// VM's), as such a domain has none.
func (lab *Lab) RemoveCD(t testing.TB, vm *VM) {
	t.Helper()
	var def libvirtxml.Domain
	if err := def.Unmarshal(lab.LiveXML(t, vm.Name, libvirt.DomainXMLInactive)); err != nil {
		t.Fatal(err)
	}
	def.Devices.Disks = slices.DeleteFunc(def.Devices.Disks, func(d libvirtxml.DomainDisk) bool { return d.Device == "cdrom" })
	if !slices.ContainsFunc(def.Devices.Disks, func(d libvirtxml.DomainDisk) bool { return d.Target != nil && d.Target.Bus == "scsi" }) {
		def.Devices.Controllers = slices.DeleteFunc(def.Devices.Controllers, func(c libvirtxml.DomainController) bool { return c.Type == "scsi" })
	}
	x, err := def.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lab.Client.DomainDefineXML(x); err != nil {
		t.Fatal(err)
	}
	if !testenv.WaitFor(5*time.Second, func() bool {
		m, err := lab.Service.Get(vm.ID)
		return err == nil && machine.MediaOf(m, machine.SlotCD).Drive == nil
	}) {
		t.Fatalf("the backend still sees a CD drive on %s", vm.Name)
	}
}
