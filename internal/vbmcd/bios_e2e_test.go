package vbmcd

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/bmlab/bmlab/internal/machine"
	"github.com/bmlab/bmlab/internal/testenv"
	"github.com/bmlab/bmlab/internal/virt"
)

type sushyBIOS struct {
	Status     int
	Messages   []string
	Current    map[string]any
	Pending    map[string]any
	ApplyTimes []string `json:"apply_times"`
	Registry   map[string]struct {
		Type          string
		ReadOnly      bool `json:"read_only"`
		ResetRequired bool `json:"reset_required"`
		Values        []string
	}
}

// sushyBios runs one step of the BIOS flow through python3-sushy's bios API.
func sushyBios(t *testing.T, url, id string, step ...string) sushyBIOS {
	t.Helper()
	return adminStep[sushyBIOS](t, "sushy_bios.py", url, id, step...)
}

// TestE2EBIOSSettings drives Ironic's BIOS flow with sushy against a legacy
// BIOS VM on real qemu: the registry describes the attributes, changes stay
// pending (and the VM keeps SeaBIOS) until the next reset, the reset makes
// them current and BootMode Uefi really restarts the VM on OVMF; bad values
// are refused with their Base messages; ResetBios stages the defaults.
func TestE2EBIOSSettings(t *testing.T) {
	fw := virt.DetectFirmware()
	testenv.Require(t, fw.Code != "", "OVMF (package ovmf)")
	lab, vm, url := markerLab(t, "e2e-biosset-")

	sushy(t, url, "admin", "e2e-pass", vm.ID, "reset", "On")
	n := vm.WaitMarker(t, testenv.DiskMarker, 0, bootTimeout)

	st := sushyBios(t, url, vm.ID, "show")
	if !slices.Equal(st.ApplyTimes, []string{"OnReset"}) {
		t.Errorf("supported apply times %v, want [OnReset]", st.ApplyTimes)
	}
	if r := st.Registry["BootMode"]; !slices.Equal(r.Values, []string{"Uefi", "Bios"}) || r.ReadOnly || !r.ResetRequired {
		t.Errorf("registry entry of BootMode: %+v", r)
	}
	if r := st.Registry["TpmSecurity"]; !r.ReadOnly {
		t.Errorf("registry entry of TpmSecurity: %+v, want read-only", r)
	}
	for name := range st.Current {
		if _, ok := st.Registry[name]; !ok {
			t.Errorf("current attribute %s is not in the registry", name)
		}
	}
	if st.Current["BootMode"] != "Bios" {
		t.Fatalf("a SeaBIOS VM shows BootMode %v", st.Current["BootMode"])
	}

	st = sushyBios(t, url, vm.ID, "set", "BootMode=Uefi", "ProcTurboMode=Disabled", "PxeRetryCount=5")
	want := map[string]any{"BootMode": "Uefi", "ProcTurboMode": "Disabled", "PxeRetryCount": 5.0}
	if diff := cmp.Diff(want, st.Pending); diff != "" {
		t.Errorf("pending after set_attributes (-want +got):\n%s", diff)
	}
	if st.Current["BootMode"] != "Bios" || st.Current["ProcTurboMode"] != "Enabled" {
		t.Errorf("the change is current before any reset: %v", st.Current)
	}
	if x := lab.LiveXML(t, vm.Name, 0); strings.Contains(x, fw.Code) {
		t.Errorf("the running VM switched to OVMF before a reset")
	}

	refused := []struct {
		set  []string
		want string
	}{
		{[]string{"BootMode=Legacy"}, "PropertyValueNotInList"},
		{[]string{"TpmSecurity=Off"}, "PropertyNotWritable"},
		{[]string{"PxeRetryCount=99"}, "PropertyValueOutOfRange"},
		{[]string{"QuietBoot=yes"}, "PropertyValueTypeError"},
		{[]string{"Overclock=Enabled"}, "PropertyUnknown"},
		{[]string{"BootMode=Bios", "SecureBoot=Enabled"}, "PropertyValueConflict"},
	}
	for _, r := range refused {
		st = sushyBios(t, url, vm.ID, append([]string{"set"}, r.set...)...)
		if st.Status != 400 || len(st.Messages) != 1 || !strings.HasSuffix(st.Messages[0], "."+r.want) {
			t.Errorf("set %v: status %d messages %v, want 400 %s", r.set, st.Status, st.Messages, r.want)
		}
		if diff := cmp.Diff(want, st.Pending); diff != "" {
			t.Errorf("set %v changed the pending settings (-want +got):\n%s", r.set, diff)
		}
	}

	// The reset applies them: the VM restarts on OVMF and boots its disk.
	sushy(t, url, "admin", "e2e-pass", vm.ID, "reset", "ForceRestart")
	vm.WaitMarker(t, testenv.DiskMarker, n, 2*bootTimeout)
	if x := lab.LiveXML(t, vm.Name, 0); !strings.Contains(x, fw.Code) {
		t.Errorf("after the reset the VM does not run OVMF (%s)", fw.Code)
	}
	if m, err := lab.Service.Get(vm.ID); err != nil || m.Mode != machine.BootModeUEFI {
		t.Errorf("active firmware after the reset: %v %v", m, err)
	}
	st = sushyBios(t, url, vm.ID, "show")
	if len(st.Pending) != 0 {
		t.Errorf("pending after the reset: %v", st.Pending)
	}
	for k, v := range want {
		if st.Current[k] != v {
			t.Errorf("after the reset %s = %v, want %v", k, st.Current[k], v)
		}
	}
	if s := sushy(t, url, "admin", "e2e-pass", vm.ID, "show"); s.Mode != "UEFI" {
		t.Errorf("BootSourceOverrideMode %q after BootMode Uefi, want UEFI", s.Mode)
	}

	// gofish reads the same current attributes.
	gc := gofishClient(t, url, "admin", "e2e-pass", false)
	defer gc.Logout()
	b, err := gofishSystem(t, gc, vm.ID).Bios()
	if err != nil {
		t.Fatal(err)
	}
	if got := b.Attributes.String("BootMode"); got != "Uefi" {
		t.Errorf("gofish reads BootMode %q, want Uefi", got)
	}
	if got := b.Attributes.Int("PxeRetryCount"); got != 5 {
		t.Errorf("gofish reads PxeRetryCount %d, want 5", got)
	}

	// ResetBios stages the factory values; the current ones stay.
	st = sushyBios(t, url, vm.ID, "factory-reset")
	if st.Pending["ProcTurboMode"] != "Enabled" || st.Pending["PxeRetryCount"] != 3.0 || st.Pending["BootMode"] != "Uefi" {
		t.Errorf("pending after reset_bios: %v", st.Pending)
	}
	if _, ok := st.Pending["TpmSecurity"]; ok {
		t.Errorf("reset_bios staged the read-only TpmSecurity")
	}
	if st.Current["ProcTurboMode"] != "Disabled" {
		t.Errorf("reset_bios changed the current settings at once: %v", st.Current)
	}
}
