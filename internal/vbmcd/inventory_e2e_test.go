package vbmcd

import (
	"slices"
	"strings"
	"testing"

	"github.com/digitalocean/go-libvirt"
	"github.com/stmcginnis/gofish/schemas"
	"libvirt.org/go/libvirtxml"

	"github.com/bmlab/bmlab/internal/testenv"
	"github.com/bmlab/bmlab/internal/virttest"
)

// TestE2EInventory: gofish inspects a VM out of band as an inspection tool
// does: memory, PCIe devices with their functions, network adapters with
// their ports, boot progress and the health roll-up, all matching the
// domain's definition in libvirt.
func TestE2EInventory(t *testing.T) {
	lab := virttest.New(t, "e2e-inv-")
	vm := lab.NewVM(t, "a", virttest.VMOptions{DiskMarker: true, NoCD: true, NICModels: []string{"virtio", "e1000e"}})
	url := daemon(t, "e2e-inv-")

	var def libvirtxml.Domain
	if err := def.Unmarshal(lab.LiveXML(t, vm.Name, libvirt.DomainXMLInactive)); err != nil {
		t.Fatal(err)
	}
	var macs []string
	for _, in := range def.Devices.Interfaces {
		macs = append(macs, strings.ToLower(in.MAC.Address))
	}
	slices.Sort(macs)

	gc := gofishClient(t, url, "admin", "e2e-pass", false)
	defer gc.Logout()
	sys := gofishSystem(t, gc, vm.ID)
	if sys.BootProgress.LastState != "None" || sys.Status.HealthRollup != schemas.OKHealth {
		t.Errorf("off: BootProgress %q, HealthRollup %q", sys.BootProgress.LastState, sys.Status.HealthRollup)
	}
	mem, err := sys.Memory()
	if err != nil || len(mem) != 1 || mem[0].CapacityMiB == nil || *mem[0].CapacityMiB != int(def.Memory.Value>>10) {
		t.Errorf("memory %v (%v), want one DIMM of the domain's %d KiB", mem, err, def.Memory.Value)
	}

	chs, err := sys.Chassis()
	if err != nil || len(chs) != 1 {
		t.Fatalf("chassis %v %v", chs, err)
	}
	devs, err := chs[0].PCIeDevices()
	if err != nil {
		t.Fatal(err)
	}
	var nicFns []string
	for _, d := range devs {
		fns, err := d.PCIeFunctions()
		if err != nil || len(fns) == 0 {
			t.Errorf("PCIe device %s: functions %v %v", d.ID, fns, err)
		}
		for _, f := range fns {
			if f.DeviceClass == schemas.NetworkControllerDeviceClass {
				nicFns = append(nicFns, f.VendorID+":"+f.DeviceID)
			}
		}
	}
	slices.Sort(nicFns)
	// virtio behind a PCIe root port is modern-only (1af4:1041); e1000e is
	// Intel's 82574L.
	if want := []string{"0x1af4:0x1041", "0x8086:0x10d3"}; !slices.Equal(nicFns, want) {
		t.Errorf("network PCIe functions %v, want %v", nicFns, want)
	}

	adapters, err := chs[0].NetworkAdapters()
	if err != nil {
		t.Fatal(err)
	}
	var seen []string
	for _, a := range adapters {
		ports, err := a.Ports()
		if err != nil || len(ports) != 1 {
			t.Fatalf("adapter %s: ports %v %v", a.ID, ports, err)
		}
		p := ports[0]
		seen = append(seen, p.Ethernet.AssociatedMACAddresses...)
		if p.LinkStatus != schemas.LinkDownPortLinkStatus {
			t.Errorf("port of %v: link %q, but the domain has the link down", p.Ethernet.AssociatedMACAddresses, p.LinkStatus)
		}
	}
	slices.Sort(seen)
	if !slices.Equal(seen, macs) {
		t.Errorf("ports' MACs %v, the domain's %v", seen, macs)
	}

	sushy(t, url, "admin", "e2e-pass", vm.ID, "reset", "On")
	vm.WaitMarker(t, testenv.DiskMarker, 0, bootTimeout)
	sys = gofishSystem(t, gc, vm.ID)
	if sys.BootProgress.LastState != schemas.SystemHardwareInitializationCompleteBootProgressTypes {
		t.Errorf("running: BootProgress %q", sys.BootProgress.LastState)
	}
}
