package virt_test

import (
	"context"
	"strings"
	"testing"

	"github.com/digitalocean/go-libvirt"

	"github.com/bmlab/bmlab/internal/machine"
	"github.com/bmlab/bmlab/internal/testenv"
	"github.com/bmlab/bmlab/internal/virttest"
)

// TestEjectRightAfterAnOutsideStart: a domain started outside vbmcd (the
// agent-based installer's reboot, virsh start) and ejected at once, before
// vbmcd has heard of the start, has its CD emptied in the running domain
// too, not only in its definition: the eject reads the domain's state from
// libvirt, not from vbmcd's cache. (labctl's agent mode met this: the ISO
// stayed in the running node and vbmcd then showed it as inserted.)
func TestEjectRightAfterAnOutsideStart(t *testing.T) {
	lab := virttest.New(t, "vt-extstart-")
	ctx := context.Background()
	for i := range 3 {
		vm := lab.NewVM(t, string(rune('a'+i)), virttest.VMOptions{DiskMarker: true})
		if err := lab.Backend.SetMedia(ctx, vm.ID, machine.SlotCD, testenv.MarkerISO(t)); err != nil {
			t.Fatal(err)
		}
		d, err := lab.Client.DomainLookupByName(vm.Name)
		if err != nil {
			t.Fatal(err)
		}
		if err := lab.Client.DomainCreate(d); err != nil {
			t.Fatal(err)
		}
		if err := lab.Backend.SetMedia(ctx, vm.ID, machine.SlotCD, ""); err != nil {
			t.Fatalf("eject right after an outside start: %v", err)
		}
		live := lab.LiveXML(t, vm.Name, 0)
		inactive := lab.LiveXML(t, vm.Name, libvirt.DomainXMLInactive)
		for what, x := range map[string]string{"running domain": live, "definition": inactive} {
			if strings.Contains(x, testenv.MarkerISO(t)) {
				t.Errorf("round %d: the %s still holds the ISO after the eject", i, what)
			}
		}
	}
}
