package domain

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"libvirt.org/go/libvirtxml"

	"github.com/bmlab/bmlab/internal/virt"
)

// TestXMLSecureBoot: SecureBoot swaps in the secure-boot build and
// the enrolled variable store, marks the loader secure and turns SMM on;
// without it the plain build has neither. Secure boot without UEFI, on an
// i440fx machine or without the secure files is refused.
func TestXMLSecureBoot(t *testing.T) {
	fw := virt.Firmware{UEFI: virt.UEFI{Code: "/fw/CODE.fd", Vars: "/fw/VARS.fd", SecureCode: "/fw/CODE.secboot.fd", SecureVars: "/fw/VARS.ms.fd"}}
	parse := func(s Spec) *libvirtxml.Domain { t.Helper(); return parseXML(t, s, fw) }
	d := parse(Spec{Name: "sb", UEFI: true, SecureBoot: true})
	if l := d.OS.Loader; l == nil || l.Path != fw.SecureCode || l.Secure != "yes" || d.OS.NVRam == nil || d.OS.NVRam.Template != fw.SecureVars {
		t.Errorf("secure boot loader %+v, nvram %+v; want %s secure, template %s", d.OS.Loader, d.OS.NVRam, fw.SecureCode, fw.SecureVars)
	}
	if d.Features.SMM == nil || d.Features.SMM.State != "on" {
		t.Errorf("secure boot without SMM: %+v", d.Features.SMM)
	}
	d = parse(Spec{Name: "efi", UEFI: true})
	if l := d.OS.Loader; l == nil || l.Path != fw.Code || l.Secure != "no" || d.OS.NVRam.Template != fw.Vars || d.Features.SMM != nil {
		t.Errorf("plain UEFI: loader %+v, nvram %+v, smm %+v", d.OS.Loader, d.OS.NVRam, d.Features.SMM)
	}
	for _, c := range []struct {
		spec Spec
		fw   virt.Firmware
		want string
	}{
		{Spec{Name: "bios", SecureBoot: true}, fw, "needs UEFI"},
		{Spec{Name: "pc", Machine: "pc", UEFI: true, SecureBoot: true}, fw, "needs q35"},
		{Spec{Name: "nofw", UEFI: true, SecureBoot: true}, virt.Firmware{UEFI: virt.UEFI{Code: fw.Code, Vars: fw.Vars}}, "install the ovmf package"},
	} {
		if _, err := c.spec.XML(c.fw); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error saying %q", c.spec.Name, err, c.want)
		}
	}
}

// TestXMLAArch64: an aarch64 domain is qemu's virt machine on AAVMF
// (the firmware's aarch64 half), a named core under TCG and the host's
// under KVM, no APIC, its CD drive on a virtio-scsi controller (virt has
// no SATA or IDE; libvirt's own pick, an LSI controller, AAVMF cannot
// boot from), a USB controller for virtual media's stick; secure boot is
// AAVMF's enrolled store without SMM. Legacy BIOS, a missing AAVMF and an
// unknown architecture are refused.
func TestXMLAArch64(t *testing.T) {
	fw := virt.Firmware{
		UEFI:    virt.UEFI{Code: "/ovmf/CODE.fd", Vars: "/ovmf/VARS.fd"},
		AArch64: virt.UEFI{Code: "/aavmf/CODE.fd", Vars: "/aavmf/VARS.fd", SecureCode: "/aavmf/CODE.fd", SecureVars: "/aavmf/VARS.ms.fd"},
	}
	parse := func(s Spec) *libvirtxml.Domain { t.Helper(); return parseXML(t, s, fw) }
	d := parse(Spec{Name: "arm", Arch: "aarch64", UEFI: true, Disks: []Disk{{Path: "/d.qcow2"}}, NICs: []NIC{{Bridge: "br0"}}})
	if d.Type != "qemu" || d.OS.Type.Arch != "aarch64" || d.OS.Type.Machine != "virt" {
		t.Errorf("type %q arch %q machine %q, want qemu aarch64 virt", d.Type, d.OS.Type.Arch, d.OS.Type.Machine)
	}
	if d.OS.Loader == nil || d.OS.Loader.Path != fw.AArch64.Code || d.OS.NVRam.Template != fw.AArch64.Vars {
		t.Errorf("loader %+v nvram %+v, want AAVMF", d.OS.Loader, d.OS.NVRam)
	}
	if d.Features.APIC != nil || d.Features.ACPI == nil {
		t.Errorf("features %+v: want ACPI, no APIC", d.Features)
	}
	if d.CPU == nil || d.CPU.Model == nil || d.CPU.Model.Value != "cortex-a57" {
		t.Errorf("cpu %+v, want cortex-a57 under TCG", d.CPU)
	}
	var cd *libvirtxml.DomainDisk
	for i, dk := range d.Devices.Disks {
		if dk.Device == "cdrom" {
			cd = &d.Devices.Disks[i]
		}
	}
	if cd == nil || cd.Target.Bus != "scsi" || cd.Target.Dev != "sda" {
		t.Fatalf("CD drive %+v, want scsi sda", cd)
	}
	var scsi, usb bool
	for _, c := range d.Devices.Controllers {
		scsi = scsi || (c.Type == "scsi" && c.Model == "virtio-scsi")
		usb = usb || (c.Type == "usb" && c.Model == "qemu-xhci")
	}
	if !scsi || !usb {
		t.Errorf("controllers %+v: want virtio-scsi and qemu-xhci", d.Devices.Controllers)
	}
	if d.Devices.Disks[0].Target.Bus != "virtio" {
		t.Errorf("disk bus %q, want virtio", d.Devices.Disks[0].Target.Bus)
	}
	d = parse(Spec{Name: "armkvm", Arch: "aarch64", Type: "kvm", UEFI: true})
	if d.Type != "kvm" || d.CPU == nil || d.CPU.Mode != "host-passthrough" {
		t.Errorf("kvm: type %q cpu %+v, want kvm host-passthrough", d.Type, d.CPU)
	}
	d = parse(Spec{Name: "armsb", Arch: "aarch64", UEFI: true, SecureBoot: true})
	if d.OS.NVRam.Template != fw.AArch64.SecureVars || d.OS.Loader.Secure != "no" || d.Features.SMM != nil {
		t.Errorf("aarch64 secure boot: loader %+v nvram %+v smm %+v; want the enrolled store, no SMM", d.OS.Loader, d.OS.NVRam, d.Features.SMM)
	}
	for _, c := range []struct {
		spec Spec
		fw   virt.Firmware
		want string
	}{
		{Spec{Name: "armbios", Arch: "aarch64"}, fw, "UEFI only"},
		{Spec{Name: "noaavmf", Arch: "aarch64", UEFI: true}, virt.Firmware{UEFI: fw.UEFI}, "install the qemu-efi-aarch64"},
		{Spec{Name: "riscv", Arch: "riscv64", UEFI: true}, fw, `architecture "riscv64"`},
	} {
		if _, err := c.spec.XML(c.fw); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error saying %q", c.spec.Name, err, c.want)
		}
	}
}

// TestType: an aarch64 node is kvm where libvirt lists KVM for
// aarch64 (an arm64 host), else qemu; an x86_64 node stays qemu even where
// KVM is listed (it may not run: the CI host lists it without hardware
// virtualization).
func TestType(t *testing.T) {
	caps := func(arches ...string) []byte {
		x := "<capabilities><host><cpu><arch>x86_64</arch></cpu></host>"
		for _, a := range arches {
			name, kvm, _ := strings.Cut(a, "+")
			x += "<guest><os_type>hvm</os_type><arch name='" + name + "'><domain type='qemu'/>"
			if kvm == "kvm" {
				x += "<domain type='kvm'/>"
			}
			x += "</arch></guest>"
		}
		return []byte(x + "</capabilities>")
	}
	for _, tt := range []struct {
		caps       []byte
		arch, want string
	}{
		{caps("x86_64+kvm", "aarch64"), "x86_64", "qemu"},
		{caps("x86_64+kvm", "aarch64"), "aarch64", "qemu"},
		{caps("aarch64+kvm"), "aarch64", "kvm"},
		{[]byte("not xml"), "aarch64", "qemu"},
	} {
		if got := Type(tt.caps, tt.arch); got != tt.want {
			t.Errorf("Type(%s, %s) = %s, want %s", tt.caps, tt.arch, got, tt.want)
		}
	}
}

// TestXMLDisplay: every lab domain has the VNC display on a unix
// socket that vbmcd's graphical console reads.
func TestXMLDisplay(t *testing.T) {
	x, err := Spec{Name: "d"}.XML(virt.Firmware{})
	if err != nil {
		t.Fatal(err)
	}
	var d libvirtxml.Domain
	if err := d.Unmarshal(x); err != nil {
		t.Fatal(err)
	}
	g := d.Devices.Graphics
	if len(g) != 1 || g[0].VNC == nil || len(g[0].VNC.Listeners) != 1 || g[0].VNC.Listeners[0].Socket == nil || g[0].VNC.Port != 0 {
		t.Errorf("graphics %+v, want one VNC display listening on a socket", g)
	}
}

// TestNICDrift: a domain's interfaces against the NICs wanted, in order.
func TestNICDrift(t *testing.T) {
	in := func(mac, network, bridge string) libvirtxml.DomainInterface {
		i := libvirtxml.DomainInterface{MAC: &libvirtxml.DomainInterfaceMAC{Address: mac}, Source: &libvirtxml.DomainInterfaceSource{}}
		if network != "" {
			i.Source.Network = &libvirtxml.DomainInterfaceSourceNetwork{Network: network}
		} else {
			i.Source.Bridge = &libvirtxml.DomainInterfaceSourceBridge{Bridge: bridge}
		}
		return i
	}
	want := []NIC{{MAC: "52:54:00:00:00:01", Network: "provisioning"}, {MAC: "52:54:00:00:00:02", Network: "baremetal"}}
	for _, tt := range []struct {
		name string
		got  []libvirtxml.DomainInterface
		want []string
	}{
		{"as planned (MACs in any case)", []libvirtxml.DomainInterface{in("52:54:00:00:00:01", "provisioning", ""), in("52:54:00:00:00:02", "baremetal", "")}, nil},
		{"defined before the provisioning NIC", []libvirtxml.DomainInterface{in("52:54:00:00:00:02", "baremetal", "")}, []string{
			"NIC 1 is 52:54:00:00:00:02 on network baremetal, want 52:54:00:00:00:01 on network provisioning",
			"NIC 2 (52:54:00:00:00:02 on network baremetal) missing"}},
		{"on a bridge, an extra NIC", []libvirtxml.DomainInterface{in("52:54:00:00:00:01", "", "provisioning"), in("52:54:00:00:00:02", "baremetal", ""), in("52:54:00:00:00:03", "default", "")}, []string{
			"NIC 1 is 52:54:00:00:00:01 on bridge provisioning, want 52:54:00:00:00:01 on network provisioning",
			"NIC 3 is 52:54:00:00:00:03 on network default, which the lab does not have"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if d := cmp.Diff(tt.want, NICDrift(want, tt.got)); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
		})
	}
}

// TestXMLTCGWithoutCX16: an x86 domain under TCG is qemu64 without
// CMPXCHG16B (QEMU 7.2's TCG computes the flags after it wrongly: see
// XML); a KVM domain keeps libvirt's default CPU.
func TestXMLTCGWithoutCX16(t *testing.T) {
	for _, typ := range []string{"", "qemu", "kvm"} {
		x, err := Spec{Name: "n", MemoryMiB: 128, Type: typ}.XML(virt.Firmware{})
		if err != nil {
			t.Fatal(err)
		}
		var d libvirtxml.Domain
		if err := d.Unmarshal(x); err != nil {
			t.Fatal(err)
		}
		tcg := typ != "kvm"
		has := d.CPU != nil && d.CPU.Model != nil && d.CPU.Model.Value == "qemu64" &&
			len(d.CPU.Features) == 1 && d.CPU.Features[0] == libvirtxml.DomainCPUFeature{Policy: "disable", Name: "cx16"}
		if has != tcg {
			t.Errorf("type %q: cpu %+v, want qemu64 without cx16: %v", typ, d.CPU, tcg)
		}
	}
}

// parseXML is s's definition as libvirtxml reads it back.
func parseXML(t *testing.T, s Spec, fw virt.Firmware) *libvirtxml.Domain {
	t.Helper()
	x, err := s.XML(fw)
	if err != nil {
		t.Fatal(err)
	}
	var d libvirtxml.Domain
	if err := d.Unmarshal(x); err != nil {
		t.Fatal(err)
	}
	return &d
}
