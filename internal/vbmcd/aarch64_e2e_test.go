package vbmcd

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/bmlab/bmlab/internal/machine"
	"github.com/bmlab/bmlab/internal/testenv"
	"github.com/bmlab/bmlab/internal/virttest"
)

// armBootTimeout bounds one boot of an aarch64 VM: under TCG the AAVMF
// firmware alone takes several seconds (docs/performance.md).
const armBootTimeout = 3 * time.Minute

// TestE2EAArch64 serves an aarch64 domain (qemu's virt machine on AAVMF,
// TCG here) as it serves an x86 one, with the real clients:
//   - python3-sushy inserts the arm64 marker ISO through virtual media into
//     a domain that has no CD drive (vbmcd adds one on virtio-scsi, with
//     its controller: virt has no SATA), sets a Once Cd override (UEFI) and
//     powers on: the ISO boots, then the next start boots the disk;
//   - IPMI SOL reaches the running machine's serial console (grub's
//     prompt on the PL011 UART);
//   - ipmitool's plain `chassis bootdev cdrom` (its legacy bit clear) sets
//     a Once Cd override that stays UEFI, and the CD boots again;
//   - Legacy boot is refused over Redfish (400, the machine is UEFI only),
//     a BIOS BootMode of Bios too (PropertyValueNotInList), and the
//     allowable boot modes say UEFI alone;
//   - the inventory says ARM-A64.
//
// It logs each boot's time under TCG: docs/performance.md quotes them.
func TestE2EAArch64(t *testing.T) {
	const user, pass = "admin", "e2e-pass"
	ipmi := newIPMITool(t, pass)
	lab := virttest.New(t, "e2e-arm-")
	vm := lab.NewVM(t, "a", virttest.VMOptions{Arch: machine.ArchAArch64, NoCD: true, DiskMarker: true})
	lab.RemoveCD(t, vm)
	url := daemon(t, "e2e-arm-", ipmi.ipmiOn)
	iso := testenv.MarkerISOArm64(t)
	img := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { http.ServeFile(w, r, iso) }))
	defer img.Close()

	sys := getJSON(t, url, "/redfish/v1/Systems/"+vm.ID)
	boot, _ := sys["Boot"].(map[string]any)
	if modes, _ := boot["BootSourceOverrideMode@Redfish.AllowableValues"].([]any); len(modes) != 1 || modes[0] != "UEFI" {
		t.Errorf("allowable boot modes %v, want [UEFI]", boot["BootSourceOverrideMode@Redfish.AllowableValues"])
	}
	cpu := getJSON(t, url, "/redfish/v1/Systems/"+vm.ID+"/Processors/CPU1")
	if cpu["InstructionSet"] != "ARM-A64" {
		t.Errorf("processor %v, want InstructionSet ARM-A64", cpu)
	}

	var m sushyMedia
	runSushy(t, "sushy_vmedia.py", url, user, pass, vm.ID, []string{"insert", img.URL + "/arm.iso"}, &m)
	if !testenv.WaitFor(time.Minute, func() bool {
		runSushy(t, "sushy_vmedia.py", url, user, pass, vm.ID, []string{"show"}, &m)
		return m.Inserted && m.Image != ""
	}) {
		t.Fatalf("the image never showed inserted: %+v", m)
	}
	def := lab.LiveXML(t, vm.Name, 0)
	if !strings.Contains(def, "bus='scsi'") || !strings.Contains(def, "model='virtio-scsi'") {
		t.Fatalf("the CD drive vbmcd added is not on virtio-scsi:\n%s", def)
	}
	if st := sushy(t, url, user, pass, vm.ID, "boot", "Cd", "Once", "UEFI"); st.Target != "Cd" || st.Mode != "UEFI" {
		t.Fatalf("after set_system_boot_options: %+v", st)
	}
	began := time.Now()
	sushy(t, url, user, pass, vm.ID, "reset", "On")
	cd := vm.WaitMarker(t, testenv.Marker, 0, armBootTimeout)
	t.Logf("aarch64 TCG: Reset On to the CD's marker in %s", time.Since(began).Round(100*time.Millisecond))
	lab.WaitPower(t, vm.ID, machine.PowerOff, armBootTimeout) // the marker halts
	t.Logf("aarch64 TCG: Reset On to powered off after the CD's marker in %s", time.Since(began).Round(100*time.Millisecond))
	if st := sushy(t, url, user, pass, vm.ID, "show"); st.Enabled != "Disabled" {
		t.Errorf("the Once override should be spent by the boot: %+v", st)
	}

	began = time.Now()
	sushy(t, url, user, pass, vm.ID, "reset", "On")
	vm.WaitMarker(t, testenv.DiskMarker, 0, armBootTimeout)
	t.Logf("aarch64 TCG: Reset On to the disk's marker in %s", time.Since(began).Round(100*time.Millisecond))
	if c, _ := vm.Markers(); c != cd {
		t.Fatalf("the CD booted again after a spent Once override")
	}
	// The disk marker stays at grub's prompt: SOL reaches it.
	if err := solProbe(t, ipmi, time.Minute); err != nil {
		t.Errorf("SOL on the aarch64 machine: %v", err)
	}

	ipmi.must(t, "chassis", "power", "off")
	lab.WaitPower(t, vm.ID, machine.PowerOff, time.Minute)
	ipmi.must(t, "chassis", "bootdev", "cdrom")
	if st := sushy(t, url, user, pass, vm.ID, "show"); st.Target != "Cd" || st.Enabled != "Once" || st.Mode != "UEFI" {
		t.Fatalf("after ipmitool chassis bootdev cdrom: %+v, want Cd Once UEFI (an aarch64 machine boots UEFI whatever the legacy bit says)", st)
	}
	ipmi.must(t, "chassis", "power", "on")
	vm.WaitMarker(t, testenv.Marker, cd, armBootTimeout)
	lab.WaitPower(t, vm.ID, machine.PowerOff, armBootTimeout)

	// What the hardware does not have is refused, saying why.
	patch := func(path, body string) (int, string) {
		t.Helper()
		r, err := send("PATCH", url+path, user, pass, body)
		if err != nil {
			t.Fatal(err)
		}
		return r.Code, string(r.Body)
	}
	code, body := patch("/redfish/v1/Systems/"+vm.ID, `{"Boot":{"BootSourceOverrideTarget":"Cd","BootSourceOverrideMode":"Legacy"}}`)
	if code != http.StatusBadRequest || !strings.Contains(body, "UEFI only") {
		t.Errorf("Legacy boot on aarch64: %d %s, want 400 saying the machine is UEFI only", code, body)
	}
	code, body = patch("/redfish/v1/Systems/"+vm.ID+"/Bios/Settings", `{"Attributes":{"BootMode":"Bios"}}`)
	if code != http.StatusBadRequest || !strings.Contains(body, "PropertyValueNotInList") || !strings.Contains(body, "UEFI only") {
		t.Errorf("BIOS BootMode Bios on aarch64: %d %s, want 400 PropertyValueNotInList", code, body)
	}
}
