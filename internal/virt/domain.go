package virt

import (
	"cmp"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"

	"libvirt.org/go/libvirtxml"

	"github.com/bmlab/bmlab/internal/machine"
)

// UEFI is one architecture's UEFI firmware: its code and the template of
// its variable store, with secure boot off and on (keys enrolled).
type UEFI struct {
	Code, Vars             string
	SecureCode, SecureVars string
}

// Firmware names the UEFI images the backend switches domains between:
// OVMF for x86_64 domains (the fields of its UEFI), AAVMF for aarch64 ones.
type Firmware struct {
	UEFI
	// AArch64 is AAVMF. An aarch64 machine has no SMM: its secure boot is
	// the same code with a variable store whose keys are enrolled.
	AArch64 UEFI
}

// For is the UEFI firmware of an architecture (x86_64 when empty).
func (f Firmware) For(arch string) UEFI {
	if arch == machine.ArchAArch64 {
		return f.AArch64
	}
	return f.UEFI
}

// DetectFirmware finds OVMF and AAVMF on Debian/Ubuntu or Fedora/RHEL
// hosts. Missing files leave fields empty; UEFI (or secure boot) is then
// refused with a clear error rather than a domain that cannot start.
func DetectFirmware() Firmware {
	pick := func(paths ...string) string {
		for _, p := range paths {
			if _, err := os.Stat(p); err == nil {
				return p
			}
		}
		return ""
	}
	return Firmware{
		UEFI: UEFI{
			Code:       pick("/usr/share/OVMF/OVMF_CODE_4M.fd", "/usr/share/OVMF/OVMF_CODE.fd", "/usr/share/edk2/ovmf/OVMF_CODE.fd"),
			Vars:       pick("/usr/share/OVMF/OVMF_VARS_4M.fd", "/usr/share/OVMF/OVMF_VARS.fd", "/usr/share/edk2/ovmf/OVMF_VARS.fd"),
			SecureCode: pick("/usr/share/OVMF/OVMF_CODE_4M.secboot.fd", "/usr/share/OVMF/OVMF_CODE.secboot.fd", "/usr/share/edk2/ovmf/OVMF_CODE.secboot.fd"),
			SecureVars: pick("/usr/share/OVMF/OVMF_VARS_4M.ms.fd", "/usr/share/OVMF/OVMF_VARS.ms.fd", "/usr/share/edk2/ovmf/OVMF_VARS.secboot.fd"),
		},
		// Debian's qemu-efi-aarch64; Fedora's edk2-aarch64.
		AArch64: UEFI{
			Code:       pick("/usr/share/AAVMF/AAVMF_CODE.fd", "/usr/share/edk2/aarch64/QEMU_EFI-pflash.raw"),
			Vars:       pick("/usr/share/AAVMF/AAVMF_VARS.fd", "/usr/share/edk2/aarch64/vars-template-pflash.raw"),
			SecureCode: pick("/usr/share/AAVMF/AAVMF_CODE.ms.fd", "/usr/share/edk2/aarch64/QEMU_EFI-pflash.raw"),
			SecureVars: pick("/usr/share/AAVMF/AAVMF_VARS.ms.fd", "/usr/share/edk2/aarch64/vars-template-pflash.secboot.raw"),
		},
	}
}

// FirmwarePackage names the Debian package with an architecture's UEFI
// firmware, for messages.
func FirmwarePackage(arch string) string {
	if arch == machine.ArchAArch64 {
		return "qemu-efi-aarch64 (AAVMF)"
	}
	return "ovmf"
}

// firmwareOf tells the mode and secure boot state a definition boots with.
func firmwareOf(d *libvirtxml.Domain) (machine.BootMode, bool) {
	if d.OS == nil {
		return machine.BootModeLegacy, false
	}
	secure := false
	if fi := d.OS.FirmwareInfo; fi != nil {
		for _, f := range fi.Features {
			if f.Name == "secure-boot" && f.Enabled == "yes" {
				secure = true
			}
		}
	}
	if l := d.OS.Loader; l != nil {
		if l.Secure == "yes" || strings.Contains(l.Path, "secboot") {
			secure = true
		}
		if n := d.OS.NVRam; domainArch(d) == machine.ArchAArch64 && n != nil && (strings.Contains(n.Template, ".ms.") || strings.Contains(n.Template, "secboot")) {
			// AAVMF's secure boot is its variable store with keys.
			secure = true
		}
		if l.Type == "pflash" || strings.Contains(strings.ToLower(l.Path), "ovmf") || strings.Contains(strings.ToLower(l.Path), "aavmf") || strings.Contains(l.Path, "edk2") {
			return machine.BootModeUEFI, secure
		}
	}
	if d.OS.Firmware == "efi" {
		return machine.BootModeUEFI, secure
	}
	return machine.BootModeLegacy, false
}

// bootSignature captures what a start fixes until the next start: boot
// order and firmware. Two definitions with the same signature boot alike.
func bootSignature(d *libvirtxml.Domain) string {
	if d == nil || d.OS == nil {
		return ""
	}
	var b strings.Builder
	for _, bd := range d.OS.BootDevices {
		b.WriteString(bd.Dev + ",")
	}
	for _, dk := range d.Devices.Disks {
		if dk.Boot != nil {
			fmt.Fprintf(&b, "d%s=%d,", targetDev(dk), dk.Boot.Order)
		}
	}
	for _, in := range d.Devices.Interfaces {
		if in.Boot != nil && in.MAC != nil {
			fmt.Fprintf(&b, "n%s=%d,", in.MAC.Address, in.Boot.Order)
		}
	}
	mode, secure := firmwareOf(d)
	fmt.Fprintf(&b, "|%s|%v", mode, secure)
	if l := d.OS.Loader; l != nil {
		b.WriteString("|" + l.Path)
	}
	if n := d.OS.NVRam; n != nil {
		// The template holds the secure boot keys a start begins with.
		b.WriteString("|" + n.Template)
	}
	return b.String()
}

func targetDev(dk libvirtxml.DomainDisk) string {
	if dk.Target != nil {
		return dk.Target.Dev
	}
	return ""
}

// bootOrderOf returns the order a definition boots devices in, as os/boot
// names (hd, cdrom, network, fd): the os/boot list, else the per-device
// order, else the disk.
func bootOrderOf(d *libvirtxml.Domain) []string {
	if d.OS != nil && len(d.OS.BootDevices) > 0 {
		var out []string
		for _, bd := range d.OS.BootDevices {
			out = append(out, bd.Dev)
		}
		return out
	}
	type item struct {
		order uint
		dev   string
	}
	var items []item
	for _, dk := range d.Devices.Disks {
		if dk.Boot != nil {
			dev := "hd"
			switch dk.Device {
			case "cdrom":
				dev = "cdrom"
			case "floppy":
				dev = "fd"
			}
			items = append(items, item{dk.Boot.Order, dev})
		}
	}
	for _, in := range d.Devices.Interfaces {
		if in.Boot != nil {
			items = append(items, item{in.Boot.Order, "network"})
		}
	}
	sort.Slice(items, func(i, j int) bool { return items[i].order < items[j].order })
	var out []string
	for _, it := range items {
		if !slices.Contains(out, it.dev) {
			out = append(out, it.dev)
		}
	}
	if len(out) == 0 {
		out = []string{"hd"}
	}
	return out
}

// deviceFor maps an override target to a libvirt boot device. BiosSetup
// cannot be expressed as a libvirt boot device: it keeps the machine's own
// order (the override is still reported, as a BMC would). UefiHttp boots
// the CD drive: the BMC fetches the image and puts it there (see the
// machine package).
func deviceFor(t machine.BootSource) string {
	switch t {
	case machine.BootPxe:
		return "network"
	case machine.BootHdd, machine.BootUsb:
		return "hd"
	case machine.BootCd, machine.BootUefiHttp, machine.BootUsbCd:
		return "cdrom"
	}
	return ""
}

// orderFor puts the override's device first and keeps the default order
// after it.
func orderFor(target machine.BootSource, def []string) []string {
	first := deviceFor(target)
	if first == "" {
		return slices.Clone(def)
	}
	out := []string{first}
	for _, d := range def {
		if d != first {
			out = append(out, d)
		}
	}
	return out
}

// applySettings rewrites a persistent definition so its next start boots as
// st says. It reports whether the firmware's NVRAM template changed (the
// NVRAM must then be recreated at the next start).
func applySettings(d *libvirtxml.Domain, st machine.Settings, defaultOrder []string, fw Firmware) (bool, error) {
	if d.OS == nil {
		d.OS = &libvirtxml.DomainOS{}
	}
	// Per-device boot elements cannot be combined with os/boot.
	for i := range d.Devices.Disks {
		d.Devices.Disks[i].Boot = nil
	}
	for i := range d.Devices.Interfaces {
		d.Devices.Interfaces[i].Boot = nil
	}
	d.OS.BootDevices = nil
	if plan := machine.BootPlan(inventoryOf(d), st); plan != nil {
		orderDevices(d, plan)
	} else {
		for _, dev := range orderFor(st.Boot.Effective(), defaultOrder) {
			d.OS.BootDevices = append(d.OS.BootDevices, libvirtxml.DomainBootDevice{Dev: dev})
		}
	}

	oldTemplate := ""
	if d.OS.NVRam != nil {
		oldTemplate = d.OS.NVRam.Template
	}
	arch := domainArch(d)
	switch st.Boot.Mode {
	case machine.BootModeLegacy:
		if arch == machine.ArchAArch64 {
			return false, machine.ErrUEFIOnly
		}
		d.OS.Firmware, d.OS.FirmwareInfo, d.OS.Loader, d.OS.NVRam = "", nil, nil, nil
		return false, nil
	case machine.BootModeUEFI:
	default:
		return false, fmt.Errorf("%w: boot mode %q", machine.ErrInvalid, st.Boot.Mode)
	}
	u := fw.For(arch)
	code, vars := u.Code, u.Vars
	if st.SecureBoot {
		code, vars = u.SecureCode, u.SecureVars
		if arch != machine.ArchAArch64 && !strings.Contains(machineType(d), "q35") {
			return false, fmt.Errorf("%w: secure boot needs a q35 machine; this domain is %q", machine.ErrUnsupported, machineType(d))
		}
	}
	if code == "" || vars == "" {
		what := "UEFI firmware"
		if st.SecureBoot {
			what = "secure-boot UEFI firmware (with enrolled keys)"
		}
		return false, fmt.Errorf("%w: no %s for %s on this host; install the %s package", machine.ErrUnsupported, what, cmp.Or(arch, machine.ArchX86_64), FirmwarePackage(arch))
	}
	secure := "no"
	if st.SecureBoot && arch != machine.ArchAArch64 {
		// OVMF's secure-boot build keeps its variables safe in SMM, which
		// aarch64 does not have.
		secure = "yes"
		if d.Features == nil {
			d.Features = &libvirtxml.DomainFeatureList{}
		}
		d.Features.SMM = &libvirtxml.DomainFeatureSMM{State: "on"}
	}
	d.OS.Firmware, d.OS.FirmwareInfo = "", nil
	d.OS.Loader = &libvirtxml.DomainLoader{Path: code, Readonly: "yes", Type: "pflash", Secure: secure}
	if d.OS.NVRam == nil {
		d.OS.NVRam = &libvirtxml.DomainNVRam{}
	}
	d.OS.NVRam.Template = vars
	return oldTemplate != "" && oldTemplate != vars, nil
}

// domainArch is a definition's architecture (x86_64 when it names none).
func domainArch(d *libvirtxml.Domain) string {
	if d.OS != nil && d.OS.Type != nil && d.OS.Type.Arch != "" {
		return d.OS.Type.Arch
	}
	return machine.ArchX86_64
}

func machineType(d *libvirtxml.Domain) string {
	if d.OS == nil || d.OS.Type == nil {
		return ""
	}
	return d.OS.Type.Machine
}

// inventoryOf reads the hardware of a definition.
func inventoryOf(d *libvirtxml.Domain) machine.Inventory {
	inv := machine.Inventory{Arch: machine.ArchX86_64, MachineType: "pc"}
	if d.VCPU != nil {
		inv.VCPUs = int(d.VCPU.Value)
	}
	if inv.VCPUs == 0 {
		inv.VCPUs = 1
	}
	inv.Sockets, inv.Cores, inv.Threads = inv.VCPUs, 1, 1
	if d.CPU != nil && d.CPU.Topology != nil && d.CPU.Topology.Sockets > 0 {
		t := d.CPU.Topology
		inv.Sockets, inv.Cores, inv.Threads = t.Sockets, max(t.Cores, 1), max(t.Threads, 1)
		if t.Dies > 1 {
			inv.Cores *= t.Dies
		}
	}
	if d.Memory != nil {
		inv.MemoryBytes = toBytes(d.Memory.Value, d.Memory.Unit)
	}
	if d.OS != nil && d.OS.Type != nil {
		if d.OS.Type.Arch != "" {
			inv.Arch = d.OS.Type.Arch
		}
		switch m := d.OS.Type.Machine; {
		case strings.Contains(m, "q35"):
			inv.MachineType = "q35"
		case strings.HasPrefix(m, "virt"):
			inv.MachineType = "virt"
		}
	}
	if d.Devices == nil {
		return inv
	}
	for _, in := range d.Devices.Interfaces {
		n := machine.NIC{}
		if in.MAC != nil {
			n.MAC = strings.ToLower(in.MAC.Address)
		}
		n.LLDP = lldpOf(in)
		if s := in.Source; s != nil {
			switch {
			case s.Network != nil:
				n.Network = s.Network.Network
			case s.Bridge != nil:
				n.Network = s.Bridge.Bridge
			}
		}
		if in.Model != nil {
			n.Model = in.Model.Type
		}
		n.PCI = pciAddress(in.Address)
		n.LinkDown = in.Link != nil && in.Link.State == "down"
		inv.NICs = append(inv.NICs, n)
	}
	for _, dk := range d.Devices.Disks {
		disk := machine.Disk{ID: targetDev(dk), Device: machine.DiskDevice(dk.Device), ReadOnly: dk.ReadOnly != nil}
		if disk.Device == "" {
			disk.Device = machine.DeviceDisk
		}
		if dk.Target != nil {
			disk.Bus, disk.RotationRate = dk.Target.Bus, dk.Target.RotationRate
		}
		disk.Source = diskSource(dk)
		inv.Disks = append(inv.Disks, disk)
	}
	inv.PCI = pciOf(d)
	return inv
}

func diskSource(dk libvirtxml.DomainDisk) string {
	s := dk.Source
	if s == nil {
		return ""
	}
	switch {
	case s.File != nil:
		return s.File.File
	case s.Block != nil:
		return s.Block.Dev
	case s.Volume != nil:
		return s.Volume.Pool + "/" + s.Volume.Volume
	case s.Network != nil:
		name := s.Network.Name
		if len(s.Network.Hosts) > 0 {
			h := s.Network.Hosts[0]
			return fmt.Sprintf("%s://%s%s", s.Network.Protocol, h.Name, name)
		}
		return s.Network.Protocol + ":" + name
	}
	return ""
}

func toBytes(v uint, unit string) int64 {
	n := int64(v)
	switch strings.ToLower(unit) {
	case "b", "bytes":
		return n
	case "", "k", "kib":
		return n << 10
	case "kb":
		return n * 1000
	case "m", "mib":
		return n << 20
	case "mb":
		return n * 1000 * 1000
	case "g", "gib":
		return n << 30
	case "gb":
		return n * 1000 * 1000 * 1000
	case "t", "tib":
		return n << 40
	}
	return n << 10
}
