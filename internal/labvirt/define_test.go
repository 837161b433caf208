package labvirt

import (
	"strings"
	"testing"

	"libvirt.org/go/libvirtxml"

	"github.com/bmlab/bmlab/internal/virt"
)

// TestDomainXMLSecureBoot: SecureBoot swaps in the secure-boot build and
// the enrolled variable store, marks the loader secure and turns SMM on;
// without it the plain build has neither. Secure boot without UEFI, on an
// i440fx machine or without the secure files is refused.
func TestDomainXMLSecureBoot(t *testing.T) {
	fw := virt.Firmware{Code: "/fw/CODE.fd", Vars: "/fw/VARS.fd", SecureCode: "/fw/CODE.secboot.fd", SecureVars: "/fw/VARS.ms.fd"}
	parse := func(s DomainSpec) *libvirtxml.Domain {
		t.Helper()
		x, err := s.DomainXML(fw)
		if err != nil {
			t.Fatal(err)
		}
		var d libvirtxml.Domain
		if err := d.Unmarshal(x); err != nil {
			t.Fatal(err)
		}
		return &d
	}
	d := parse(DomainSpec{Name: "sb", UEFI: true, SecureBoot: true})
	if l := d.OS.Loader; l == nil || l.Path != fw.SecureCode || l.Secure != "yes" || d.OS.NVRam == nil || d.OS.NVRam.Template != fw.SecureVars {
		t.Errorf("secure boot loader %+v, nvram %+v; want %s secure, template %s", d.OS.Loader, d.OS.NVRam, fw.SecureCode, fw.SecureVars)
	}
	if d.Features.SMM == nil || d.Features.SMM.State != "on" {
		t.Errorf("secure boot without SMM: %+v", d.Features.SMM)
	}
	d = parse(DomainSpec{Name: "efi", UEFI: true})
	if l := d.OS.Loader; l == nil || l.Path != fw.Code || l.Secure != "no" || d.OS.NVRam.Template != fw.Vars || d.Features.SMM != nil {
		t.Errorf("plain UEFI: loader %+v, nvram %+v, smm %+v", d.OS.Loader, d.OS.NVRam, d.Features.SMM)
	}
	for _, c := range []struct {
		spec DomainSpec
		fw   virt.Firmware
		want string
	}{
		{DomainSpec{Name: "bios", SecureBoot: true}, fw, "needs UEFI"},
		{DomainSpec{Name: "pc", Machine: "pc", UEFI: true, SecureBoot: true}, fw, "needs q35"},
		{DomainSpec{Name: "nofw", UEFI: true, SecureBoot: true}, virt.Firmware{Code: fw.Code, Vars: fw.Vars}, "install the ovmf package"},
	} {
		if _, err := c.spec.DomainXML(c.fw); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error saying %q", c.spec.Name, err, c.want)
		}
	}
}
