package vbmcd

import (
	"os"
	"strings"
	"testing"

	"github.com/bmlab/bmlab/internal/testenv"
	"github.com/bmlab/bmlab/internal/virt"
)

// TestE2EKubeVirtSecureBoot: Ironic's set_secure_boot_state through sushy
// on a KubeVirt VM. Secure boot on writes efi.secureBoot true and
// features.smm into the VM's spec; the next instance runs OVMF's
// secure-boot build with Microsoft's keys enrolled, which refuses the
// unsigned marker ISO ("Access Denied" on the serial console, as
// TestE2ESecureBootKeys shows on libvirt) and reads back
// SecureBootCurrentBoot Enabled. Secure boot off again, the ISO boots.
func TestE2EKubeVirtSecureBoot(t *testing.T) {
	fw := virt.DetectFirmware()
	testenv.Require(t, fw.Code != "" && fw.Vars != "" && fw.SecureCode != "" && fw.SecureVars != "", "OVMF with secure boot and both variable templates (package ovmf)")
	f, kv, vm, id := oneKubeVirtVM(t, "e2e-kvsb-", "kvsb-0")
	url := kubevirtDaemon(t, f, f.VBMCDKubeconfig(t, nil))
	const user, pass = "admin", "e2e-pass"
	serial := f.SerialLog(vm.Name)
	count := func(s string) int { return testenv.Count(serial, s) }
	wait := func(what string, before int) {
		t.Helper()
		if !testenv.WaitFor(2*bootTimeout, func() bool { return count(what) > before }) {
			b, _ := os.ReadFile(serial)
			t.Fatalf("%q did not appear on the serial console within %s (count stays %d); it ends:\n%q", what, 2*bootTimeout, before, b[max(0, len(b)-600):])
		}
	}

	// UEFI first (Once Cd), then set_secure_boot_state(True), as Ironic
	// does it: the spec gets secureBoot true and SMM.
	if st := sushy(t, url, user, pass, id, "boot", "Cd", "Once", "UEFI"); st.Mode != "UEFI" {
		t.Fatalf("after set_system_boot_options: %+v", st)
	}
	st := sushySecureBoot(t, url, id, "enable", "true")
	if st.Refused != nil || !st.Enabled {
		t.Fatalf("secure boot not enabled: %+v", st)
	}
	// KubeVirt's firmware variables are out of vbmcd's reach: no key
	// databases are linked (a link that answered 404 before).
	if st.Databases != nil {
		t.Errorf("key databases served on KubeVirt: %v", st.Databases)
	}
	spec := getVM(t, kv, f.Namespace, vm.Name).Spec.Template.Spec.Domain
	if efi := spec.Firmware; efi == nil || efi.Bootloader == nil || efi.Bootloader.EFI == nil || efi.Bootloader.EFI.SecureBoot == nil || !*efi.Bootloader.EFI.SecureBoot {
		t.Fatalf("the VM's firmware is %+v, want efi with secureBoot true", efi)
	}
	if ft := spec.Features; ft == nil || ft.SMM == nil || ft.SMM.Enabled == nil || !*ft.SMM.Enabled {
		t.Fatalf("the VM's features are %+v, want smm enabled (KubeVirt refuses secure boot without it)", ft)
	}

	// The next start: the secure firmware refuses the unsigned ISO.
	sushy(t, url, user, pass, id, "reset", "On")
	wait("Access Denied", 0)
	if n := count(testenv.Marker); n != 0 {
		t.Errorf("the unsigned ISO booted under secure boot (%d markers)", n)
	}
	x := instanceXML(t, f, vm)
	if !strings.Contains(x, fw.SecureCode) || !strings.Contains(x, "secure='yes'") || !strings.Contains(x, "<smm state='on'") {
		t.Errorf("the instance's domain does not boot the secure-boot firmware with SMM (%s):\n%s", fw.SecureCode, x)
	}
	if st := sushySecureBoot(t, url, id, "show"); !strings.Contains(strings.ToLower(st.CurrentBoot), "enabled") {
		t.Errorf("SecureBootCurrentBoot %q while the secure instance runs, want Enabled", st.CurrentBoot)
	}

	// Secure boot off: the spec says so at once, the next start boots
	// the ISO.
	sushy(t, url, user, pass, id, "reset", "ForceOff")
	if st := sushySecureBoot(t, url, id, "enable", "false"); st.Refused != nil || st.Enabled {
		t.Fatalf("secure boot not disabled: %+v", st)
	}
	if efi := getVM(t, kv, f.Namespace, vm.Name).Spec.Template.Spec.Domain.Firmware; efi == nil || efi.Bootloader == nil || efi.Bootloader.EFI == nil || efi.Bootloader.EFI.SecureBoot == nil || *efi.Bootloader.EFI.SecureBoot {
		t.Fatalf("the VM's firmware is %+v, want efi with secureBoot false", efi)
	}
	denied := count("Access Denied")
	sushy(t, url, user, pass, id, "boot", "Cd", "Once", "UEFI")
	sushy(t, url, user, pass, id, "reset", "On")
	wait(testenv.Marker, 0)
	if n := count("Access Denied"); n != denied {
		t.Errorf("Access Denied again with secure boot off (%d, %d before)", n, denied)
	}
}
