package virt_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/digitalocean/go-libvirt"

	"github.com/bmlab/bmlab/internal/machine"
	"github.com/bmlab/bmlab/internal/testenv"
	"github.com/bmlab/bmlab/internal/virt"
	"github.com/bmlab/bmlab/internal/virttest"
)

func ptr[T any](v T) *T { return &v }

// bootTimeout is generous: TCG on a busy 2-core machine.
const bootTimeout = 60 * time.Second

// TestOnceAndContinuousBootTheMarker is the real-BMC boot semantics on real
// qemu: a Once override to Cd boots the marker ISO and the next boot boots
// the disk; Continuous keeps booting the CD. BIOS and UEFI.
func TestOnceAndContinuousBootTheMarker(t *testing.T) {
	for _, fw := range []string{"bios", "uefi"} {
		t.Run(fw, func(t *testing.T) {
			lab := virttest.New(t, "vt-boot-"+fw+"-")
			vm := lab.NewVM(t, "a", virttest.VMOptions{UEFI: fw == "uefi", DiskMarker: true})
			ctx := context.Background()
			svc := lab.Service

			m, _ := svc.Get(vm.ID)
			wantMode := machine.BootModeLegacy
			if fw == "uefi" {
				wantMode = machine.BootModeUEFI
			}
			if m.Mode != wantMode || m.Settings.Boot.Mode != wantMode {
				t.Fatalf("mode active %s stored %s, want %s", m.Mode, m.Settings.Boot.Mode, wantMode)
			}

			// Once to Cd: this boot shows the CD's marker.
			if _, err := svc.SetBoot(ctx, vm.ID, machine.BootPatch{Target: ptr(machine.BootCd), Enabled: ptr(machine.BootOnce)}); err != nil {
				t.Fatal(err)
			}
			if err := svc.Reset(ctx, vm.ID, machine.ResetOn); err != nil {
				t.Fatal(err)
			}
			cd := vm.WaitMarker(t, testenv.Marker, 0, bootTimeout)
			if _, disk := vm.Markers(); disk != 0 {
				t.Fatalf("the disk booted although the Once override said Cd")
			}
			m, _ = svc.Get(vm.ID)
			if m.Settings.Boot.Enabled != machine.BootDisabled {
				t.Errorf("Once override not spent after the boot: %+v", m.Settings.Boot)
			}
			// The marker powers the VM off; the next boot is from the disk,
			// which stays running.
			lab.WaitPower(t, vm.ID, machine.PowerOff, bootTimeout)
			if err := svc.Reset(ctx, vm.ID, machine.ResetOn); err != nil {
				t.Fatal(err)
			}
			vm.WaitMarker(t, testenv.DiskMarker, 0, bootTimeout)
			if c, _ := vm.Markers(); c != cd {
				t.Errorf("the CD booted again after the Once override was spent")
			}
			if err := svc.Reset(ctx, vm.ID, machine.ResetForceOff); err != nil {
				t.Fatal(err)
			}
			// Answered at once; done soon after.
			lab.WaitPower(t, vm.ID, machine.PowerOff, 10*time.Second)
			if st := lab.DomainState(t, vm.Name); st != libvirt.DomainShutoff {
				t.Fatalf("after ForceOff libvirt says state %d", st)
			}

			// Continuous: every boot is from the CD.
			if _, err := svc.SetBoot(ctx, vm.ID, machine.BootPatch{Target: ptr(machine.BootCd), Enabled: ptr(machine.BootContinuous)}); err != nil {
				t.Fatal(err)
			}
			for i := 0; i < 2; i++ {
				if err := svc.Reset(ctx, vm.ID, machine.ResetOn); err != nil {
					t.Fatal(err)
				}
				cd = vm.WaitMarker(t, testenv.Marker, cd, bootTimeout)
				lab.WaitPower(t, vm.ID, machine.PowerOff, bootTimeout)
			}
			m, _ = svc.Get(vm.ID)
			if m.Settings.Boot.Enabled != machine.BootContinuous || m.Settings.Boot.Target != machine.BootCd {
				t.Errorf("Continuous override lost: %+v", m.Settings.Boot)
			}
		})
	}
}

// TestForceRestartAppliesAPendingOverride: a Once override set while the VM
// runs takes effect at ForceRestart (a cold restart, since the boot order the
// VM runs with differs), as a real BMC's reset does.
func TestForceRestartAppliesAPendingOverride(t *testing.T) {
	lab := virttest.New(t, "vt-reset-")
	// The disk marker boots and stays at grub's prompt: a running VM.
	vm := lab.NewVM(t, "a", virttest.VMOptions{DiskMarker: true})
	ctx := context.Background()
	svc := lab.Service
	if err := svc.Reset(ctx, vm.ID, machine.ResetOn); err != nil {
		t.Fatal(err)
	}
	lab.WaitPower(t, vm.ID, machine.PowerOn, 10*time.Second)
	vm.WaitMarker(t, testenv.DiskMarker, 0, bootTimeout)
	if st := lab.DomainState(t, vm.Name); st != libvirt.DomainRunning {
		t.Fatalf("libvirt state %d, want running", st)
	}
	if _, err := svc.SetBoot(ctx, vm.ID, machine.BootPatch{Target: ptr(machine.BootCd), Enabled: ptr(machine.BootOnce)}); err != nil {
		t.Fatal(err)
	}
	if !lab.Backend.Stale(vm.ID) {
		live, next := lab.Backend.Signatures(vm.ID)
		t.Fatalf("a pending boot override on a running VM should make it stale; live %q next %q", live, next)
	}
	if c, _ := vm.Markers(); c != 0 {
		t.Fatalf("marker before the reset")
	}
	if err := svc.Reset(ctx, vm.ID, machine.ResetForceRestart); err != nil {
		t.Fatal(err)
	}
	vm.WaitMarker(t, testenv.Marker, 0, bootTimeout)
}

// TestSettingsLiveInTheDomain: a second backend (a restarted daemon) sees
// the state the first one stored, because it lives in the domain's metadata.
func TestSettingsLiveInTheDomain(t *testing.T) {
	lab := virttest.New(t, "vt-meta-")
	vm := lab.NewVM(t, "a", virttest.VMOptions{})
	ctx := context.Background()
	if _, err := lab.Service.SetBoot(ctx, vm.ID, machine.BootPatch{Target: ptr(machine.BootPxe), Enabled: ptr(machine.BootContinuous), Mode: ptr(machine.BootModeUEFI)}); err != nil {
		t.Fatal(err)
	}
	if _, err := lab.Service.SetBIOSPending(ctx, vm.ID, map[string]any{"ProcTurboMode": "Disabled"}); err != nil {
		t.Fatal(err)
	}
	if _, err := lab.Service.UpdateSettings(ctx, vm.ID, func(s *machine.Settings) error {
		s.Credentials = []machine.Credential{{Username: "node", Password: "s3cret"}}
		s.Firmware = map[machine.FirmwareComponent]string{machine.FirmwareBMC: "5.0"}
		s.FirmwarePending = map[machine.FirmwareComponent]string{machine.FirmwareBIOS: "2.3.1"}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	x := lab.LiveXML(t, vm.Name, libvirt.DomainXMLInactive)
	for _, want := range []string{virt.MetadataNS, `<boot dev="network"`, "OVMF"} {
		if !strings.Contains(strings.ReplaceAll(x, "'", `"`), want) {
			t.Errorf("persistent XML lacks %s:\n%s", want, x)
		}
	}

	be2, err := virt.New(virt.Config{Domains: []string{"vt-meta-*"}}, testenv.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if err := be2.Connect(cctx, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	m, err := be2.Get(vm.Name)
	if err != nil {
		t.Fatal(err)
	}
	want := machine.Boot{Target: machine.BootPxe, Enabled: machine.BootContinuous, Mode: machine.BootModeUEFI}
	if m.Settings.Boot != want {
		t.Errorf("second daemon sees boot %+v, want %+v", m.Settings.Boot, want)
	}
	if m.Settings.BIOSPending["ProcTurboMode"] != "Disabled" {
		t.Errorf("second daemon sees BIOS pending %v", m.Settings.BIOSPending)
	}
	if len(m.Settings.Credentials) != 1 || m.Settings.Credentials[0].Password != "s3cret" {
		t.Errorf("second daemon sees credentials %v", m.Settings.Credentials)
	}
	if v, p := m.Settings.FirmwareVersion(machine.FirmwareBMC), m.Settings.FirmwarePending; v != "5.0" ||
		len(p) != 1 || p[machine.FirmwareBIOS] != "2.3.1" || m.Settings.FirmwareVersion(machine.FirmwareBIOS) != machine.FactoryFirmware {
		t.Errorf("second daemon sees firmware %v, staged %v; want BMC 5.0 and BIOS 2.3.1 staged", m.Settings.Firmware, p)
	}
	// The first backend learns of a change made through the second one by
	// events, without a poll.
	if err := machine.NewService(be2, nil).Reset(ctx, vm.ID, machine.ResetOn); err != nil {
		t.Fatal(err)
	}
	lab.WaitPower(t, vm.ID, machine.PowerOn, 5*time.Second)
}

// TestUnknownDomain: lookups of what is not there are ErrNotFound.
func TestUnknownDomain(t *testing.T) {
	lab := virttest.New(t, "vt-none-")
	if _, err := lab.Service.Get("00000000-0000-0000-0000-000000000000"); err == nil {
		t.Fatal("want an error")
	}
	if err := lab.Service.Reset(context.Background(), "vt-none-x", machine.ResetOn); err == nil {
		t.Fatal("want an error")
	}
}

// TestWarmResetReboots: ForceRestart of a VM that runs with the stored
// configuration is a warm reset, and the VM really boots again.
func TestWarmResetReboots(t *testing.T) {
	lab := virttest.New(t, "vt-warm-")
	vm := lab.NewVM(t, "a", virttest.VMOptions{DiskMarker: true, NoCD: true})
	ctx := context.Background()
	if err := lab.Service.Reset(ctx, vm.ID, machine.ResetOn); err != nil {
		t.Fatal(err)
	}
	n := vm.WaitMarker(t, testenv.DiskMarker, 0, bootTimeout)
	if lab.Backend.Stale(vm.ID) {
		live, next := lab.Backend.Signatures(vm.ID)
		t.Fatalf("freshly started VM is stale: live %q next %q", live, next)
	}
	if err := lab.Service.Reset(ctx, vm.ID, machine.ResetForceRestart); err != nil {
		t.Fatal(err)
	}
	vm.WaitMarker(t, testenv.DiskMarker, n, bootTimeout)
}

// TestFirmwareFollowsTheBMC: BootSourceOverrideMode switches a Legacy VM to
// UEFI at its next start, and secure boot on makes the firmware refuse the
// unsigned marker ISO, as real secure boot does.
func TestFirmwareFollowsTheBMC(t *testing.T) {
	fw := virt.DetectFirmware()
	testenv.Require(t, fw.Code != "" && fw.SecureCode != "", "OVMF with and without secure boot (package ovmf)")
	lab := virttest.New(t, "vt-fw-")
	vm := lab.NewVM(t, "a", virttest.VMOptions{})
	ctx := context.Background()
	svc := lab.Service

	if _, err := svc.SetBoot(ctx, vm.ID, machine.BootPatch{Target: ptr(machine.BootCd), Enabled: ptr(machine.BootOnce), Mode: ptr(machine.BootModeUEFI)}); err != nil {
		t.Fatal(err)
	}
	if err := svc.Reset(ctx, vm.ID, machine.ResetOn); err != nil {
		t.Fatal(err)
	}
	if x := lab.LiveXML(t, vm.Name, 0); !strings.Contains(x, fw.Code) {
		t.Errorf("the started VM does not run OVMF (%s)", fw.Code)
	}
	m, _ := svc.Get(vm.ID)
	if m.Mode != machine.BootModeUEFI {
		t.Errorf("active mode %s, want UEFI", m.Mode)
	}
	vm.WaitMarker(t, testenv.Marker, 0, 2*bootTimeout)
	lab.WaitPower(t, vm.ID, machine.PowerOff, bootTimeout)
	// Counted once the first boot is over, not when its first marker
	// showed: all of that boot's console output is in the log by now.
	n, _ := vm.Markers()

	if _, err := svc.SetSecureBoot(ctx, vm.ID, true); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.SetBoot(ctx, vm.ID, machine.BootPatch{Target: ptr(machine.BootCd), Enabled: ptr(machine.BootOnce)}); err != nil {
		t.Fatal(err)
	}
	if err := svc.Reset(ctx, vm.ID, machine.ResetOn); err != nil {
		t.Fatal(err)
	}
	m, _ = svc.Get(vm.ID)
	if !m.SecureBootActive {
		t.Errorf("secure boot not active after the start")
	}
	// The enrolled keys refuse grub from the marker ISO: OVMF says so on
	// the serial console, and the marker never appears.
	vm.WaitMarker(t, "Access Denied", testenv.Count(vm.SerialLog, "Access Denied"), 2*bootTimeout)
	if c, _ := vm.Markers(); c != n {
		log, _ := os.ReadFile(vm.SerialLog)
		t.Errorf("the unsigned ISO booted with secure boot on (%d markers before the secure start, %d after); serial log:\n%s", n, c, log)
	}
}

// TestBIOSSecureBootAtReset: the BIOS attribute SecureBoot staged on a
// running UEFI VM changes nothing until the next reset; the reset restarts
// the VM on the secure-boot firmware, which then refuses the unsigned
// marker ISO.
func TestBIOSSecureBootAtReset(t *testing.T) {
	fw := virt.DetectFirmware()
	testenv.Require(t, fw.SecureCode != "", "OVMF with secure boot (package ovmf)")
	lab := virttest.New(t, "vt-biossb-")
	vm := lab.NewVM(t, "a", virttest.VMOptions{UEFI: true, DiskMarker: true})
	ctx := context.Background()
	svc := lab.Service
	if err := svc.Reset(ctx, vm.ID, machine.ResetOn); err != nil {
		t.Fatal(err)
	}
	vm.WaitMarker(t, testenv.DiskMarker, 0, 2*bootTimeout)
	if _, err := svc.SetBIOSPending(ctx, vm.ID, map[string]any{"SecureBoot": "Enabled"}); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.SetBoot(ctx, vm.ID, machine.BootPatch{Target: ptr(machine.BootCd), Enabled: ptr(machine.BootOnce)}); err != nil {
		t.Fatal(err)
	}
	if m, _ := svc.Get(vm.ID); m.SecureBootActive || strings.Contains(lab.LiveXML(t, vm.Name, 0), fw.SecureCode) {
		t.Fatalf("secure boot active before the reset")
	}
	denied := testenv.Count(vm.SerialLog, "Access Denied")
	if err := svc.Reset(ctx, vm.ID, machine.ResetForceRestart); err != nil {
		t.Fatal(err)
	}
	// The reset is answered at once and carried out after.
	var m *machine.Machine
	testenv.WaitFor(bootTimeout, func() bool {
		m, _ = svc.Get(vm.ID)
		return m.SecureBootActive && m.Power == machine.PowerOn
	})
	if !m.SecureBootActive || m.Settings.CurrentBIOS()["SecureBoot"] != "Enabled" || len(m.Settings.BIOSPending) != 0 {
		t.Errorf("after the reset: active %v, BIOS SecureBoot %v, pending %v", m.SecureBootActive, m.Settings.CurrentBIOS()["SecureBoot"], m.Settings.BIOSPending)
	}
	if !strings.Contains(lab.LiveXML(t, vm.Name, 0), fw.SecureCode) {
		t.Errorf("the restarted VM does not run %s", fw.SecureCode)
	}
	vm.WaitMarker(t, "Access Denied", denied, 2*bootTimeout)
	if c, _ := vm.Markers(); c != 0 {
		t.Errorf("the unsigned marker ISO booted under secure boot")
	}
}
