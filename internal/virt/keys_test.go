package virt_test

import (
	"context"
	"os"
	"strings"
	"testing"

	"libvirt.org/go/libvirtxml"

	"github.com/digitalocean/go-libvirt"

	"github.com/bmlab/bmlab/internal/machine"
	"github.com/bmlab/bmlab/internal/testenv"
	"github.com/bmlab/bmlab/internal/virt"
	"github.com/bmlab/bmlab/internal/virttest"
)

// TestSecureBootKeysOnQEMU: with secure boot on, the keys decide what OVMF
// boots. Keys deleted (the empty store: setup mode) boot the unsigned
// marker ISO; the factory keys refuse it ("Access Denied" on the console);
// the platform key deleted alone (the enrolled store with PK marked
// deleted: setup mode again) boots it. Each change applies at the next
// start, through libvirt's NVRAM reset.
func TestSecureBootKeysOnQEMU(t *testing.T) {
	fw := virt.DetectFirmware()
	testenv.Require(t, fw.Vars != "" && fw.SecureCode != "" && fw.SecureVars != "", "OVMF with secure boot and both variable templates (package ovmf)")
	lab := virttest.New(t, "vt-sbkeys-")
	vm := lab.NewVM(t, "a", virttest.VMOptions{UEFI: true})
	ctx := context.Background()
	svc := lab.Service

	factory, err := lab.Backend.FactoryKeys(vm.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, db := range machine.KeyDatabases {
		if len(factory[db]) == 0 {
			t.Errorf("the factory keys (%s) hold nothing in %s", fw.SecureVars, db)
		}
	}
	if _, err := svc.SetSecureBoot(ctx, vm.ID, true); err != nil {
		t.Fatal(err)
	}
	// nvram reads the template and the reset mark of the next start.
	nvram := func() (template string, reset bool) {
		t.Helper()
		var d libvirtxml.Domain
		if err := d.Unmarshal(lab.LiveXML(t, vm.Name, libvirt.DomainXMLInactive)); err != nil {
			t.Fatal(err)
		}
		return d.OS.NVRam.Template, strings.Contains(d.Metadata.XML, "reset-nvram>true")
	}
	boot := func(what string) {
		t.Helper()
		if _, err := svc.SetBoot(ctx, vm.ID, machine.BootPatch{Target: ptr(machine.BootCd), Enabled: ptr(machine.BootOnce)}); err != nil {
			t.Fatal(err)
		}
		if err := svc.Reset(ctx, vm.ID, machine.ResetOn); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		lab.WaitPower(t, vm.ID, machine.PowerOn, bootTimeout)
		if x := lab.LiveXML(t, vm.Name, 0); !strings.Contains(x, fw.SecureCode) || !strings.Contains(x, "<smm state='on'/>") {
			t.Fatalf("%s: the VM does not run %s with SMM:\n%s", what, fw.SecureCode, x)
		}
	}
	stop := func() {
		t.Helper()
		if err := svc.Reset(ctx, vm.ID, machine.ResetForceOff); err != nil {
			t.Fatal(err)
		}
		lab.WaitPower(t, vm.ID, machine.PowerOff, bootTimeout)
	}

	// Keys deleted: the empty store, setup mode, the marker boots.
	m, err := svc.ResetKeys(ctx, vm.ID, "", machine.DeleteAllKeys)
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Settings.SecureBootMode(); got != "SetupMode" {
		t.Errorf("keys deleted: mode %s, want SetupMode", got)
	}
	if tpl, _ := nvram(); tpl != fw.Vars {
		t.Errorf("keys deleted: NVRAM template %s, want the empty %s", tpl, fw.Vars)
	}
	boot("keys deleted")
	vm.WaitMarker(t, testenv.Marker, 0, 2*bootTimeout)
	lab.WaitPower(t, vm.ID, machine.PowerOff, bootTimeout) // the marker ISO halts
	markers, _ := vm.Markers()

	// The factory keys: the enrolled store, made anew at the next start;
	// OVMF refuses the unsigned grub.
	if _, err := svc.ResetKeys(ctx, vm.ID, "", machine.ResetKeysToDefault); err != nil {
		t.Fatal(err)
	}
	if tpl, reset := nvram(); tpl != fw.SecureVars || !reset {
		t.Errorf("factory keys: NVRAM template %s (reset at the next start: %v), want %s, reset", tpl, reset, fw.SecureVars)
	}
	denied := testenv.Count(vm.SerialLog, "Access Denied")
	boot("factory keys")
	vm.WaitMarker(t, "Access Denied", denied, 2*bootTimeout)
	if c, _ := vm.Markers(); c != markers {
		log, _ := os.ReadFile(vm.SerialLog)
		t.Errorf("the unsigned ISO booted with the factory keys (%d markers, %d before); serial log:\n%s", c, markers, log)
	}
	if _, reset := nvram(); reset {
		t.Errorf("the NVRAM reset mark stayed after the start that used it")
	}
	stop()

	// PK alone deleted: setup mode, with KEK, db and dbx still enrolled.
	if _, err := svc.ResetKeys(ctx, vm.ID, "", machine.DeletePK); err != nil {
		t.Fatal(err)
	}
	tpl, _ := nvram()
	if tpl == fw.SecureVars || tpl == fw.Vars || !strings.Contains(tpl, "no-PK") {
		t.Fatalf("PK deleted: NVRAM template %s, want a derived store without PK", tpl)
	}
	keys, err := virt.ReadKeys(tpl)
	if err != nil {
		t.Fatal(err)
	}
	if len(keys[machine.KeyPK]) != 0 || len(keys[machine.KeyKEK]) != len(factory[machine.KeyKEK]) || len(keys[machine.KeyDB]) != len(factory[machine.KeyDB]) {
		t.Errorf("the derived store holds PK %d, KEK %d, db %d entries; want 0, %d, %d",
			len(keys[machine.KeyPK]), len(keys[machine.KeyKEK]), len(keys[machine.KeyDB]), len(factory[machine.KeyKEK]), len(factory[machine.KeyDB]))
	}
	boot("PK deleted")
	vm.WaitMarker(t, testenv.Marker, markers, 2*bootTimeout)
}
