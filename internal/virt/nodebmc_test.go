package virt_test

import (
	"context"
	"testing"
	"time"

	"github.com/bmlab/bmlab/internal/machine"
	"github.com/bmlab/bmlab/internal/testenv"
	"github.com/bmlab/bmlab/internal/virt"
	"github.com/bmlab/bmlab/internal/virttest"
)

// TestNodeBMCFromLabctl: what labctl writes before vbmcd serves a domain
// (SetNodeBMC: the IPMI endpoint and the node's own user) gives the
// machine those and otherwise the domain's defaults (UEFI boot mode), so
// a virtual media insert and a boot override work as on any machine.
// (Before, the machine had an empty boot mode and every change of its
// settings failed: "invalid request: boot mode \"\"".)
func TestNodeBMCFromLabctl(t *testing.T) {
	lab := virttest.New(t, "vt-nodebmc-")
	vm := lab.NewVM(t, "a", virttest.VMOptions{UEFI: true}) // as labctl defines nodes
	changed, err := virt.SetNodeBMC(lab.Client, vm.Name, virt.NodeBMC{
		IPMI:  &machine.IPMIEndpoint{Port: 16999},
		Users: []machine.Credential{{Username: "vt-nodebmc-a", Password: "own-pass"}}})
	if err != nil || !changed {
		t.Fatalf("SetNodeBMC = %v, %v", changed, err)
	}
	if again, err := virt.SetNodeBMC(lab.Client, vm.Name, virt.NodeBMC{
		IPMI:  &machine.IPMIEndpoint{Port: 16999},
		Users: []machine.Credential{{Username: "vt-nodebmc-a", Password: "own-pass"}}}); err != nil || again {
		t.Errorf("SetNodeBMC again = %v, %v; want no change", again, err)
	}
	ctx := context.Background()
	var m *machine.Machine
	if !testenv.WaitFor(10*time.Second, func() bool {
		m, _ = lab.Service.Get(vm.ID)
		return m != nil && len(m.Settings.Credentials) == 1
	}) {
		t.Fatalf("vbmcd does not see labctl's user: %+v", m)
	}
	if m.Settings.IPMI == nil || m.Settings.IPMI.Port != 16999 || m.Settings.Credentials[0].Username != "vt-nodebmc-a" {
		t.Errorf("settings: IPMI %+v, users %+v", m.Settings.IPMI, m.Settings.Credentials)
	}
	if m.Settings.Boot.Mode != machine.BootModeUEFI {
		t.Errorf("boot mode %q, want the domain's UEFI", m.Settings.Boot.Mode)
	}
	cd, once := machine.BootCd, machine.BootOnce
	if _, err := lab.Service.SetBoot(ctx, vm.ID, machine.BootPatch{Target: &cd, Enabled: &once}); err != nil {
		t.Errorf("a boot override after labctl's settings: %v", err)
	}
	if err := lab.Backend.SetMedia(ctx, vm.ID, machine.SlotCD, testenv.MarkerISO(t)); err != nil {
		t.Errorf("a media change after labctl's settings: %v", err)
	}
}
