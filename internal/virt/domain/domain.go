package domain

import (
	"cmp"
	"context"
	"fmt"
	"strings"

	"github.com/digitalocean/go-libvirt"
	"libvirt.org/go/libvirtxml"

	"github.com/bmlab/bmlab/internal/machine"
	"github.com/bmlab/bmlab/internal/virt"
)

// Spec describes a VM that looks like a bare-metal server: disks, a
// CD-ROM drive for virtual media, NICs, a serial console that is both a pty
// (for consoles and SOL) and a log file.
type Spec struct {
	Name      string
	UUID      string // empty: libvirt picks one
	MemoryMiB uint
	VCPUs     uint
	// Arch is x86_64 (default) or aarch64: an aarch64 domain is qemu's
	// virt machine on AAVMF, UEFI only, its CD drive on virtio-scsi.
	Arch string
	// Type is the libvirt domain type: qemu (default: TCG, software
	// emulation) or kvm (an aarch64 node on an arm64 host: DomainType).
	Type    string
	Machine string // "q35" (default) or "pc"; aarch64's is "virt"
	UEFI    bool
	// SecureBoot (with UEFI) boots OVMF's secure-boot build, with SMM, from
	// a variable store with Microsoft's keys enrolled (the firmware's
	// SecureCode and SecureVars): unsigned EFI binaries are refused. It
	// needs a q35 machine.
	SecureBoot bool
	Disks      []Disk
	// CDROM is the ISO in the CD-ROM drive; empty leaves the drive empty. The
	// drive always exists so that "boot from Cd" has a target.
	CDROM     string
	NICs      []NIC
	SerialLog string // file that receives the serial console's output
	// BootOrder is the domain's own order (os/boot devices); default hd, network.
	BootOrder []string
	// Metadata is extra inner XML for <metadata> (ownership marks).
	Metadata string
	// Ignition, when set, is a file qemu hands the guest through fw_cfg as
	// opt/com.coreos/config, where Ignition on (RH)COS looks for its
	// config on qemu. qemu must be able to read the file.
	Ignition string
	// KCSSocket, when set, gives the domain an in-band IPMI interface (a
	// KCS) whose BMC is the vbmcd listening on this unix socket
	// (virt.KCSArgs: qemu arguments in <qemu:commandline>, as libvirt 9.0
	// has no element for it). x86_64 only.
	KCSSocket string
}

// Disk is a disk of a Spec.
type Disk struct {
	Path   string
	Format string // qcow2 (default) or raw
	Bus    string // virtio (default), sata, scsi
}

// NIC is a NIC of a Spec: on a libvirt network or a bridge.
type NIC struct {
	Network string
	Bridge  string
	MAC     string
	Model   string // virtio (default)
}

// XML builds the libvirt definition of s.
func (s Spec) XML(fw virt.Firmware) (string, error) {
	arch := cmp.Or(s.Arch, machine.ArchX86_64)
	mt := cmp.Or(s.Machine, "q35")
	features := &libvirtxml.DomainFeatureList{ACPI: &libvirtxml.DomainFeature{}, APIC: &libvirtxml.DomainFeatureAPIC{}}
	switch arch {
	case machine.ArchX86_64:
	case machine.ArchAArch64:
		// qemu's virt machine; no APIC (x86's), and UEFI only.
		mt = cmp.Or(s.Machine, "virt")
		features.APIC = nil
		if !s.UEFI {
			return "", fmt.Errorf("domain %s: an aarch64 machine boots UEFI only (AAVMF); it has no legacy BIOS", s.Name)
		}
	default:
		return "", fmt.Errorf("domain %s: architecture %q: want %s or %s", s.Name, arch, machine.ArchX86_64, machine.ArchAArch64)
	}
	d := libvirtxml.Domain{
		Type: cmp.Or(s.Type, "qemu"),
		Name: s.Name,
		UUID: s.UUID,
		Memory: &libvirtxml.DomainMemory{
			Value: s.MemoryMiB, Unit: "MiB",
		},
		VCPU: &libvirtxml.DomainVCPU{Value: max(s.VCPUs, 1)},
		OS: &libvirtxml.DomainOS{
			Type: &libvirtxml.DomainOSType{Arch: arch, Machine: mt, Type: "hvm"},
		},
		Features:   features,
		OnPoweroff: "destroy",
		OnReboot:   "restart",
		OnCrash:    "destroy",
		Devices:    &libvirtxml.DomainDeviceList{},
	}
	if arch == machine.ArchX86_64 && d.Type == "qemu" {
		// Under TCG, qemu's default x86 CPU (qemu64) without CMPXCHG16B:
		// QEMU 7.2's TCG (Debian 12's) computes the flags after it from a
		// stale condition-code state, and a Debian 13 kernel (6.12), whose
		// SLUB allocator issues it on every allocation, was seen to take a
		// double fault right after it with EFLAGS garbage (VM and NT set:
		// a pointer's low bits), in TestE2EIronicAgent. QEMU 8.0 rewrote
		// the instruction (flags computed inline). Without the feature the
		// kernel takes SLUB's path without it; x86-64 userlands of the
		// baseline ISA (Debian's) do not need it.
		d.CPU = &libvirtxml.DomainCPU{
			Mode: "custom", Match: "exact",
			Model:    &libvirtxml.DomainCPUModel{Value: "qemu64", Fallback: "forbid"},
			Features: []libvirtxml.DomainCPUFeature{{Policy: "disable", Name: "cx16"}},
		}
	}
	if arch == machine.ArchAArch64 {
		// Under TCG qemu emulates a named core (its default for virt is a
		// 32-bit one); under KVM the host's.
		d.CPU = &libvirtxml.DomainCPU{Mode: "custom", Match: "exact", Model: &libvirtxml.DomainCPUModel{Value: "cortex-a57", Fallback: "allow"}}
		if d.Type == "kvm" {
			d.CPU = &libvirtxml.DomainCPU{Mode: "host-passthrough"}
		}
	}
	if s.Metadata != "" {
		d.Metadata = &libvirtxml.DomainMetadata{XML: s.Metadata}
	}
	order := s.BootOrder
	if len(order) == 0 {
		order = []string{"hd", "network"}
	}
	for _, dev := range order {
		d.OS.BootDevices = append(d.OS.BootDevices, libvirtxml.DomainBootDevice{Dev: dev})
	}
	if s.SecureBoot && !s.UEFI {
		return "", fmt.Errorf("domain %s wants secure boot without UEFI; secure boot needs UEFI", s.Name)
	}
	if s.UEFI {
		u := fw.For(arch)
		code, vars, secure := u.Code, u.Vars, "no"
		if s.SecureBoot {
			if arch == machine.ArchX86_64 && mt != "q35" && !strings.HasPrefix(mt, "pc-q35") {
				return "", fmt.Errorf("domain %s wants secure boot on machine %q; secure boot needs q35", s.Name, mt)
			}
			if u.SecureCode == "" || u.SecureVars == "" {
				return "", fmt.Errorf("domain %s wants secure boot but no secure-boot UEFI firmware for %s (code, variables with enrolled keys) was found; install the %s package", s.Name, arch, virt.FirmwarePackage(arch))
			}
			code, vars = u.SecureCode, u.SecureVars
			if arch == machine.ArchX86_64 {
				// OVMF's secure-boot build keeps its variables safe in SMM.
				secure = "yes"
				d.Features.SMM = &libvirtxml.DomainFeatureSMM{State: "on"}
			}
		} else if code == "" || vars == "" {
			return "", fmt.Errorf("domain %s wants UEFI but no UEFI firmware for %s was found; install the %s package", s.Name, arch, virt.FirmwarePackage(arch))
		}
		d.OS.Loader = &libvirtxml.DomainLoader{Path: code, Readonly: "yes", Type: "pflash", Secure: secure}
		d.OS.NVRam = &libvirtxml.DomainNVRam{Template: vars}
	}
	dev := d.Devices
	for i, dk := range s.Disks {
		format, bus := dk.Format, dk.Bus
		if format == "" {
			format = "qcow2"
		}
		if bus == "" {
			bus = "virtio"
		}
		dev.Disks = append(dev.Disks, libvirtxml.DomainDisk{
			Device: "disk",
			Driver: &libvirtxml.DomainDiskDriver{Name: "qemu", Type: format},
			Source: &libvirtxml.DomainDiskSource{File: &libvirtxml.DomainDiskSourceFile{File: dk.Path}},
			Target: &libvirtxml.DomainDiskTarget{Dev: diskName(bus, i), Bus: bus},
		})
	}
	cd := libvirtxml.DomainDisk{
		Device:   "cdrom",
		Driver:   &libvirtxml.DomainDiskDriver{Name: "qemu", Type: "raw"},
		Target:   &libvirtxml.DomainDiskTarget{Dev: virt.CDROMDev(virt.CDROMBus(mt)), Bus: virt.CDROMBus(mt)},
		ReadOnly: &libvirtxml.DomainDiskReadOnly{},
	}
	if cd.Target.Bus == "scsi" {
		dev.Controllers = append(dev.Controllers, virt.SCSIController())
	}
	if arch == machine.ArchAArch64 {
		// A USB controller, for a removable medium (virtual media's USB
		// stick): the virt machine has none of its own.
		dev.Controllers = append(dev.Controllers, libvirtxml.DomainController{Type: "usb", Model: "qemu-xhci"})
	}
	if s.CDROM != "" {
		cd.Source = &libvirtxml.DomainDiskSource{File: &libvirtxml.DomainDiskSourceFile{File: s.CDROM}}
	}
	dev.Disks = append(dev.Disks, cd)
	for _, n := range s.NICs {
		model := n.Model
		if model == "" {
			model = "virtio"
		}
		in := libvirtxml.DomainInterface{Model: &libvirtxml.DomainInterfaceModel{Type: model}}
		if n.MAC != "" {
			in.MAC = &libvirtxml.DomainInterfaceMAC{Address: n.MAC}
		}
		switch {
		case n.Network != "":
			in.Source = &libvirtxml.DomainInterfaceSource{Network: &libvirtxml.DomainInterfaceSourceNetwork{Network: n.Network}}
		case n.Bridge != "":
			in.Source = &libvirtxml.DomainInterfaceSource{Bridge: &libvirtxml.DomainInterfaceSourceBridge{Bridge: n.Bridge}}
		default:
			return "", fmt.Errorf("domain %s: a NIC needs a network or a bridge", s.Name)
		}
		dev.Interfaces = append(dev.Interfaces, in)
	}
	port := uint(0)
	serial := libvirtxml.DomainSerial{
		Source: &libvirtxml.DomainChardevSource{Pty: &libvirtxml.DomainChardevSourcePty{}},
		Target: &libvirtxml.DomainSerialTarget{Port: &port},
	}
	if s.SerialLog != "" {
		serial.Log = &libvirtxml.DomainChardevLog{File: s.SerialLog, Append: "on"}
	}
	dev.Serials = append(dev.Serials, serial)
	dev.Consoles = append(dev.Consoles, libvirtxml.DomainConsole{
		Source: &libvirtxml.DomainChardevSource{Pty: &libvirtxml.DomainChardevSourcePty{}},
		Target: &libvirtxml.DomainConsoleTarget{Type: "serial", Port: &port},
	})
	// The screen a BMC's graphical console shows (vbmcd's web console).
	dev.Graphics = append(dev.Graphics, virt.VNCDisplay())
	if s.KCSSocket != "" {
		if arch != machine.ArchX86_64 {
			return "", fmt.Errorf("domain %s: an in-band IPMI interface (KCS) needs an ISA bus, which %s's machine has not", s.Name, arch)
		}
		d.QEMUCommandline = &libvirtxml.DomainQEMUCommandline{Args: virt.KCSArgs(s.KCSSocket)}
	}
	if s.Ignition != "" {
		d.SysInfo = append(d.SysInfo, libvirtxml.DomainSysInfo{FWCfg: &libvirtxml.DomainSysInfoFWCfg{
			Entry: []libvirtxml.DomainSysInfoEntry{{Name: "opt/com.coreos/config", File: s.Ignition}},
		}})
	}
	return d.Marshal()
}

// NICProblems compares the NICs of a defined domain with s's: each in its
// place (the first is the one the domain network-boots from), with its
// MAC, on its network or bridge. A domain that is not there has none to
// compare (the nodes step defines it).
func NICProblems(l *libvirt.Libvirt, s Spec) ([]string, error) {
	d, err := l.DomainLookupByName(s.Name)
	if err != nil {
		if IsNoDomain(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("look up domain %s: %w", s.Name, err)
	}
	x, err := l.DomainGetXMLDesc(d, libvirt.DomainXMLInactive)
	if err != nil {
		return nil, fmt.Errorf("read domain %s: %w", s.Name, err)
	}
	var def libvirtxml.Domain
	if err := def.Unmarshal(x); err != nil {
		return nil, fmt.Errorf("parse domain %s: %w", s.Name, err)
	}
	var got []libvirtxml.DomainInterface
	if def.Devices != nil {
		got = def.Devices.Interfaces
	}
	return NICDrift(s.NICs, got), nil
}

// NICDrift says how a domain's interfaces differ from the NICs wanted, in
// order: one line per NIC out of place, missing or extra.
func NICDrift(want []NIC, got []libvirtxml.DomainInterface) []string {
	var out []string
	for i := 0; i < max(len(want), len(got)); i++ {
		var w, g string
		if i < len(want) {
			w = nicText(want[i].MAC, want[i].Network, want[i].Bridge)
		}
		if i < len(got) {
			in := got[i]
			var mac, network, bridge string
			if in.MAC != nil {
				mac = in.MAC.Address
			}
			if src := in.Source; src != nil && src.Network != nil {
				network = src.Network.Network
			} else if src != nil && src.Bridge != nil {
				bridge = src.Bridge.Bridge
			}
			g = nicText(mac, network, bridge)
		}
		switch {
		case strings.EqualFold(w, g):
		case g == "":
			out = append(out, fmt.Sprintf("NIC %d (%s) missing", i+1, w))
		case w == "":
			out = append(out, fmt.Sprintf("NIC %d is %s, which the lab does not have", i+1, g))
		default:
			out = append(out, fmt.Sprintf("NIC %d is %s, want %s", i+1, g, w))
		}
	}
	return out
}

func nicText(mac, network, bridge string) string {
	switch {
	case network != "":
		return mac + " on network " + network
	case bridge != "":
		return mac + " on bridge " + bridge
	}
	return mac
}

func diskName(bus string, i int) string {
	prefix := "vd"
	if bus == "sata" || bus == "scsi" {
		prefix = "sd"
	}
	return prefix + string(rune('a'+i))
}

// Type is the domain type of an aarch64 node: kvm where libvirt's
// capabilities list KVM for aarch64 (an arm64 host), else qemu (TCG,
// software emulation). x86_64 nodes stay qemu, as labctl always made them:
// a host may list KVM that does not run (this project's CI lists it
// without hardware virtualization, and such a domain only pauses).
func Type(caps []byte, arch string) string {
	var c libvirtxml.Caps
	if arch != machine.ArchAArch64 || c.Unmarshal(string(caps)) != nil {
		return "qemu"
	}
	for _, g := range c.Guests {
		if g.Arch.Name != arch {
			continue
		}
		for _, d := range g.Arch.Domains {
			if d.Type == "kvm" {
				return "kvm"
			}
		}
	}
	return "qemu"
}

// Define defines s (or redefines it when it exists) and returns its
// UUID. A spec without a type gets Type's.
func Define(_ context.Context, l *libvirt.Libvirt, s Spec, fw virt.Firmware) (string, error) {
	if s.Type == "" {
		caps, err := l.Capabilities()
		if err != nil {
			return "", fmt.Errorf("read libvirt's capabilities: %w", err)
		}
		s.Type = Type(caps, cmp.Or(s.Arch, machine.ArchX86_64))
	}
	x, err := s.XML(fw)
	if err != nil {
		return "", err
	}
	d, err := l.DomainDefineXMLFlags(x, libvirt.DomainDefineValidate)
	if err != nil {
		return "", fmt.Errorf("define domain %s: %w", s.Name, err)
	}
	return virt.UUIDString(d.UUID), nil
}

// Delete stops and undefines a domain, NVRAM included; a domain that
// does not exist is not an error.
func Delete(_ context.Context, l *libvirt.Libvirt, name string) error {
	d, err := l.DomainLookupByName(name)
	if err != nil {
		if IsNoDomain(err) {
			return nil
		}
		return fmt.Errorf("look up domain %s: %w", name, err)
	}
	if err := l.DomainDestroyFlags(d, libvirt.DomainDestroyDefault); err != nil && !isNotRunning(err) && !IsNoDomain(err) {
		return fmt.Errorf("stop domain %s: %w", name, err)
	}
	if err := l.DomainUndefineFlags(d, libvirt.DomainUndefineNvram|libvirt.DomainUndefineManagedSave); err != nil && !IsNoDomain(err) {
		return fmt.Errorf("undefine domain %s: %w", name, err)
	}
	return nil
}

// IsNoDomain reports libvirt's "no such domain".
func IsNoDomain(err error) bool { return virt.IsCode(err, libvirt.ErrNoDomain) }

func isNotRunning(err error) bool { return virt.IsCode(err, libvirt.ErrOperationInvalid) }

// Power is a domain's state in words (running, shut off, ...), or
// "absent".
func Power(_ context.Context, l *libvirt.Libvirt, name string) (string, error) {
	d, err := l.DomainLookupByName(name)
	if IsNoDomain(err) {
		return "absent", nil
	}
	if err != nil {
		return "", fmt.Errorf("look up domain %s: %w", name, err)
	}
	st, _, err := l.DomainGetState(d, 0)
	if err != nil {
		return "", fmt.Errorf("domain %s state: %w", name, err)
	}
	switch libvirt.DomainState(st) {
	case libvirt.DomainRunning, libvirt.DomainBlocked:
		return "On", nil
	case libvirt.DomainPaused, libvirt.DomainPmsuspended:
		return "Paused", nil
	case libvirt.DomainShutdown:
		return "PoweringOff", nil
	default:
		return "Off", nil
	}
}

// Start starts a defined domain; one that runs already is no change.
func Start(_ context.Context, l *libvirt.Libvirt, name string) (bool, error) {
	d, err := l.DomainLookupByName(name)
	if err != nil {
		return false, fmt.Errorf("look up domain %s: %w", name, err)
	}
	if active, err := l.DomainIsActive(d); err == nil && active == 1 {
		return false, nil
	}
	if err := l.DomainCreate(d); err != nil {
		if isNotRunning(err) { // "domain is already running": a race with another starter
			return false, nil
		}
		return false, fmt.Errorf("start domain %s: %w", name, err)
	}
	return true, nil
}
