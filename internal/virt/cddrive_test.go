package virt_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/digitalocean/go-libvirt"

	"github.com/bmlab/bmlab/internal/machine"
	"github.com/bmlab/bmlab/internal/testenv"
	"github.com/bmlab/bmlab/internal/virttest"
)

// TestCDDriveAddedForVirtualMedia: a BMC always has its virtual CD drive.
// Media inserted into a domain without one, while it is off, gives it a
// drive for good, on its machine type's bus, and the VM boots the image;
// a running domain without one is refused with what to do.
func TestCDDriveAddedForVirtualMedia(t *testing.T) {
	lab := virttest.New(t, "vt-cdadd-")
	vm := lab.NewVM(t, "a", virttest.VMOptions{NoCD: true, DiskMarker: true})
	lab.RemoveCD(t, vm)
	ctx := context.Background()
	iso := testenv.MarkerISO(t)
	if err := lab.Backend.SetMedia(ctx, vm.ID, machine.SlotCD, iso); err != nil {
		t.Fatalf("insert into a domain without a CD drive, off: %v", err)
	}
	def := lab.LiveXML(t, vm.Name, libvirt.DomainXMLInactive)
	// virttest's machines are q35: SATA.
	if !strings.Contains(def, "device='cdrom'") || !strings.Contains(def, iso) || !strings.Contains(def, "bus='sata'") {
		t.Fatalf("no CD drive with the image on the q35 machine's SATA bus:\n%s", def)
	}
	m, _ := lab.Service.Get(vm.ID)
	if md := machine.MediaOf(m, machine.SlotCD); md.Drive == nil {
		t.Fatalf("the model sees no CD drive")
	}
	once, cd := machine.BootOnce, machine.BootCd
	if _, err := lab.Service.SetBoot(ctx, vm.ID, machine.BootPatch{Target: &cd, Enabled: &once}); err != nil {
		t.Fatal(err)
	}
	if err := lab.Service.Reset(ctx, vm.ID, machine.ResetOn); err != nil {
		t.Fatal(err)
	}
	vm.WaitMarker(t, testenv.Marker, 0, bootTimeout)
	lab.WaitPower(t, vm.ID, machine.PowerOff, bootTimeout) // the marker powers off

	// A running domain without a drive: refused, saying what to do.
	run := lab.NewVM(t, "b", virttest.VMOptions{NoCD: true, DiskMarker: true})
	lab.RemoveCD(t, run)
	if err := lab.Service.Reset(ctx, run.ID, machine.ResetOn); err != nil {
		t.Fatal(err)
	}
	lab.WaitPower(t, run.ID, machine.PowerOn, bootTimeout)
	err := lab.Backend.SetMedia(ctx, run.ID, machine.SlotCD, iso)
	if !errors.Is(err, machine.ErrUnsupported) || !strings.Contains(err.Error(), "power it off") {
		t.Errorf("insert into a running domain without a CD drive: %v", err)
	}
}
