package virt_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/digitalocean/go-libvirt"
	"libvirt.org/go/libvirtxml"

	"github.com/bmlab/bmlab/internal/machine"
	"github.com/bmlab/bmlab/internal/testenv"
	"github.com/bmlab/bmlab/internal/virttest"
)

// qemuPCI is one device of QEMU's query-pci answer.
type qemuPCI struct {
	Bus, Slot, Function uint
	ClassInfo           struct{ Class uint } `json:"class_info"`
	ID                  struct{ Vendor, Device uint16 }
	QdevID              string `json:"qdev_id"`
	PCIBridge           *struct {
		Bus     struct{ Secondary uint } // the bus behind the bridge
		Devices []qemuPCI
	} `json:"pci_bridge"`
}

// queryPCI asks the running QEMU, through libvirt's monitor pass-through,
// what it really has on its PCI buses, by address in libvirt's terms. The
// guest's firmware numbers the buses behind bridges as it enumerates them;
// libvirt's address names the bus by the index of the controller that
// provides it, and QEMU knows that controller by the alias pci.<index>.
func queryPCI(t *testing.T, lab *virttest.Lab, name string) map[string]qemuPCI {
	t.Helper()
	d, err := lab.Client.DomainLookupByName(name)
	if err != nil {
		t.Fatal(err)
	}
	out, err := lab.Client.QEMUDomainMonitorCommand(d, `{"execute": "query-pci"}`, 0)
	if err != nil {
		t.Fatalf("query-pci: %v", err)
	}
	var resp struct {
		Return []struct{ Devices []qemuPCI }
	}
	if err := json.Unmarshal([]byte(out), &resp); err != nil {
		t.Fatalf("query-pci answer %s: %v", out, err)
	}
	index := map[uint]uint{0: 0} // guest bus number → libvirt controller index
	var flat []qemuPCI
	var walk func([]qemuPCI)
	walk = func(ds []qemuPCI) {
		for _, p := range ds {
			flat = append(flat, p)
			if p.PCIBridge != nil {
				var i uint
				if _, err := fmt.Sscanf(p.QdevID, "pci.%d", &i); err == nil {
					index[p.PCIBridge.Bus.Secondary] = i
				}
				walk(p.PCIBridge.Devices)
			}
		}
	}
	for _, b := range resp.Return {
		walk(b.Devices)
	}
	all := map[string]qemuPCI{}
	for _, p := range flat {
		i, ok := index[p.Bus]
		if !ok {
			t.Fatalf("query-pci: bus %d is behind no bridge libvirt named (bridges %v)", p.Bus, index)
		}
		all[fmt.Sprintf("0000:%02x:%02x.%x", i, p.Slot, p.Function)] = p
	}
	return all
}

// classCodes maps Redfish device classes to PCI base class codes (PCI Code
// and ID Assignment Specification §1).
var classCodes = map[string]uint{
	"MassStorageController": 0x01, "NetworkController": 0x02, "DisplayController": 0x03,
	"MultimediaController": 0x04, "SimpleCommunicationController": 0x07,
	"GenericSystemPeripheral": 0x08, "InputDeviceController": 0x09, "SerialBusController": 0x0c,
	"UnclassifiedDevice": 0x00,
}

// TestPCIInventoryIsWhatQEMUHas: the PCI devices the backend derives from
// a domain's definition (address, vendor and device ID, class) are the ones
// the running QEMU reports, for a q35 and a pc machine with virtio and
// emulated NICs, and no device libvirt added is missing. NICs whose link
// is down are reported so.
func TestPCIInventoryIsWhatQEMUHas(t *testing.T) {
	for _, mt := range []string{"q35", "pc"} {
		t.Run(mt, func(t *testing.T) {
			lab := virttest.New(t, "vt-pci-"+mt+"-")
			vm := lab.NewVM(t, "a", virttest.VMOptions{DiskMarker: true, Machine: mt, NICModels: []string{"virtio", "e1000e"}})
			if err := lab.Service.Reset(context.Background(), vm.ID, machine.ResetOn); err != nil {
				t.Fatal(err)
			}
			// The firmware numbers the buses behind bridges as it
			// enumerates them; once the disk's grub prints, it has.
			vm.WaitMarker(t, testenv.DiskMarker, 0, bootTimeout)
			m, _ := lab.Service.Get(vm.ID)
			have := queryPCI(t, lab, vm.Name)

			listed := map[string]bool{}
			for _, p := range m.PCI {
				listed[p.Address] = true
				q, ok := have[p.Address]
				switch {
				case !ok:
					t.Errorf("%s (%s) is not on QEMU's bus", p.Address, p.Name)
				case q.ID.Vendor != p.VendorID || q.ID.Device != p.DeviceID:
					t.Errorf("%s (%s): we say %04x:%04x, QEMU has %04x:%04x", p.Address, p.Name, p.VendorID, p.DeviceID, q.ID.Vendor, q.ID.Device)
				case q.ClassInfo.Class>>8 != classCodes[p.Class] && !(p.Class == "UnclassifiedDevice" && q.ClassInfo.Class>>8 == 0xff):
					t.Errorf("%s (%s): class %s, QEMU has %04x", p.Address, p.Name, p.Class, q.ClassInfo.Class)
				}
			}
			for addr, q := range have {
				if q.QdevID != "" && q.ClassInfo.Class>>8 != 0x06 && !listed[addr] {
					t.Errorf("QEMU has %s (%s, %04x:%04x) that the inventory lacks", addr, q.QdevID, q.ID.Vendor, q.ID.Device)
				}
			}
			var kinds []string
			for _, n := range m.NICs {
				if n.PCI == "" || !listed[n.PCI] {
					t.Errorf("NIC %s has PCI address %q, not among the devices", n.MAC, n.PCI)
				}
				kinds = append(kinds, fmt.Sprintf("%s/%v", n.Model, n.LinkDown))
			}
			if fmt.Sprint(kinds) != "[virtio/true e1000e/true]" {
				t.Errorf("NICs (model/link down) %v, want [virtio/true e1000e/true]", kinds)
			}
		})
	}
}

// TestSSDFromTheDefinition: a disk whose definition says rotation_rate 1 is
// a solid-state drive to the guest (QEMU's device property says so) and to
// the model.
func TestSSDFromTheDefinition(t *testing.T) {
	lab := virttest.New(t, "vt-ssd-")
	vm := lab.NewVM(t, "a", virttest.VMOptions{DiskMarker: true, NoCD: true})
	var def libvirtxml.Domain
	if err := def.Unmarshal(lab.LiveXML(t, vm.Name, libvirt.DomainXMLInactive)); err != nil {
		t.Fatal(err)
	}
	dk := &def.Devices.Disks[0]
	dk.Target = &libvirtxml.DomainDiskTarget{Dev: "sdb", Bus: "sata", RotationRate: 1}
	dk.Address = nil
	x, err := def.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lab.Client.DomainDefineXML(x); err != nil {
		t.Fatal(err)
	}
	if !testenv.WaitFor(10*time.Second, func() bool {
		m, err := lab.Service.Get(vm.ID)
		return err == nil && slices.ContainsFunc(m.Disks, func(d machine.Disk) bool { return d.ID == "sdb" && d.RotationRate == 1 })
	}) {
		m, _ := lab.Service.Get(vm.ID)
		t.Fatalf("the model never saw the SSD: %+v", m.Disks)
	}
	if err := lab.Service.Reset(context.Background(), vm.ID, machine.ResetOn); err != nil {
		t.Fatal(err)
	}
	vm.WaitMarker(t, testenv.DiskMarker, 0, bootTimeout) // it still boots
	var live libvirtxml.Domain
	if err := live.Unmarshal(lab.LiveXML(t, vm.Name, 0)); err != nil {
		t.Fatal(err)
	}
	alias := ""
	for _, dk := range live.Devices.Disks {
		if dk.Target != nil && dk.Target.Dev == "sdb" && dk.Alias != nil {
			alias = dk.Alias.Name
		}
	}
	d, err := lab.Client.DomainLookupByName(vm.Name)
	if err != nil {
		t.Fatal(err)
	}
	out, err := lab.Client.QEMUDomainMonitorCommand(d,
		`{"execute": "qom-get", "arguments": {"path": "/machine/peripheral/`+alias+`", "property": "rotation_rate"}}`, 0)
	if err != nil {
		t.Fatalf("qom-get rotation_rate: %v", err)
	}
	if !strings.Contains(out, `"return": 1`) && !strings.Contains(out, `"return":1`) {
		t.Errorf("QEMU's disk has rotation_rate %s, want 1", out)
	}
}
