package virt

import (
	"fmt"
	"sort"

	"libvirt.org/go/libvirtxml"

	"github.com/bmlab/bmlab/internal/machine"
)

// pciModel is what QEMU shows on the PCI bus for one libvirt device model:
// the IDs lspci and QEMU's query-pci report.
type pciModel struct {
	class  string // Redfish PCIeFunction DeviceClass
	vendor uint16
	device uint16
	name   string
	// virtio devices are transitional (their legacy device ID) unless they
	// sit behind a PCI Express port, where QEMU makes them modern-only
	// (0x1040 + virtio device type); a type without a legacy ID is always
	// modern.
	virtioType, legacy uint16
}

const (
	vendorRedHatVirtio = 0x1af4
	vendorRedHatQEMU   = 0x1b36
	vendorIntel        = 0x8086
	vendorRealtek      = 0x10ec
	vendorBochs        = 0x1234 // QEMU's standard VGA
	vendorCirrus       = 0x1013
)

var vendorNames = map[uint16]string{
	vendorRedHatVirtio: "Red Hat, Inc.",
	vendorRedHatQEMU:   "Red Hat, Inc.",
	vendorIntel:        "Intel Corporation",
	vendorRealtek:      "Realtek Semiconductor Co., Ltd.",
	vendorBochs:        "QEMU",
	vendorCirrus:       "Cirrus Logic",
}

// Device models by libvirt element and model. Virtio device types and
// transitional IDs are from the virtio specification 1.1 §4.1.2.1 and §5.
var pciModels = map[string]pciModel{
	"interface/virtio":          {class: "NetworkController", vendor: vendorRedHatVirtio, virtioType: 1, legacy: 0x1000, name: "Virtio network device"},
	"interface/e1000e":          {class: "NetworkController", vendor: vendorIntel, device: 0x10d3, name: "82574L Gigabit Network Connection"},
	"interface/e1000":           {class: "NetworkController", vendor: vendorIntel, device: 0x100e, name: "82540EM Gigabit Ethernet Controller"},
	"interface/rtl8139":         {class: "NetworkController", vendor: vendorRealtek, device: 0x8139, name: "RTL-8100/8101L/8139 PCI Fast Ethernet Adapter"},
	"disk/virtio":               {class: "MassStorageController", vendor: vendorRedHatVirtio, virtioType: 2, legacy: 0x1001, name: "Virtio block device"},
	"controller/sata":           {class: "MassStorageController", vendor: vendorIntel, device: 0x2922, name: "82801IR/IO/IH (ICH9R/DO/DH) 6 port SATA Controller [AHCI mode]"},
	"controller/scsi":           {class: "MassStorageController", vendor: vendorRedHatVirtio, virtioType: 8, legacy: 0x1004, name: "Virtio SCSI"},
	"controller/virtio-serial":  {class: "SimpleCommunicationController", vendor: vendorRedHatVirtio, virtioType: 3, legacy: 0x1003, name: "Virtio console"},
	"controller/ide":            {class: "MassStorageController", vendor: vendorIntel, device: 0x7010, name: "82371SB PIIX3 IDE [Natoma/Triton II]"},
	"controller/usb/qemu-xhci":  {class: "SerialBusController", vendor: vendorRedHatQEMU, device: 0x000d, name: "QEMU XHCI Host Controller"},
	"controller/usb/piix3-uhci": {class: "SerialBusController", vendor: vendorIntel, device: 0x7020, name: "82371SB PIIX3 USB [Natoma/Triton II]"},
	"controller/usb/ich9-ehci1": {class: "SerialBusController", vendor: vendorIntel, device: 0x293a, name: "82801I (ICH9 Family) USB2 EHCI Controller #1"},
	"controller/usb/ich9-uhci1": {class: "SerialBusController", vendor: vendorIntel, device: 0x2934, name: "82801I (ICH9 Family) USB UHCI Controller #1"},
	"video/vga":                 {class: "DisplayController", vendor: vendorBochs, device: 0x1111, name: "Standard VGA"},
	"video/bochs":               {class: "DisplayController", vendor: vendorBochs, device: 0x1111, name: "Bochs display"},
	"video/cirrus":              {class: "DisplayController", vendor: vendorCirrus, device: 0x00b8, name: "GD 5446"},
	"video/qxl":                 {class: "DisplayController", vendor: vendorRedHatQEMU, device: 0x0100, name: "QXL paravirtual graphic card"},
	"video/virtio":              {class: "DisplayController", vendor: vendorRedHatVirtio, virtioType: 16, name: "Virtio GPU"},
	"memballoon/virtio":         {class: "UnclassifiedDevice", vendor: vendorRedHatVirtio, virtioType: 5, legacy: 0x1002, name: "Virtio memory balloon"},
	"rng/virtio":                {class: "UnclassifiedDevice", vendor: vendorRedHatVirtio, virtioType: 4, legacy: 0x1005, name: "Virtio RNG"},
	"input/virtio":              {class: "InputDeviceController", vendor: vendorRedHatVirtio, virtioType: 18, name: "Virtio input"},
	"sound/ich9":                {class: "MultimediaController", vendor: vendorIntel, device: 0x293e, name: "82801I (ICH9 Family) HD Audio Controller"},
	"sound/ich6":                {class: "MultimediaController", vendor: vendorIntel, device: 0x2668, name: "82801FB/FBM/FR/FW/FRW (ICH6 Family) High Definition Audio Controller"},
	"watchdog/i6300esb":         {class: "GenericSystemPeripheral", vendor: vendorIntel, device: 0x25ab, name: "6300ESB Watchdog Timer"},
}

// pciAddress formats a PCI address as lspci -D does; "" when a is not one.
func pciAddress(a *libvirtxml.DomainAddress) string {
	if a == nil || a.PCI == nil || a.PCI.Bus == nil || a.PCI.Slot == nil {
		return ""
	}
	var dom, fn uint
	if a.PCI.Domain != nil {
		dom = *a.PCI.Domain
	}
	if a.PCI.Function != nil {
		fn = *a.PCI.Function
	}
	return fmt.Sprintf("%04x:%02x:%02x.%x", dom, *a.PCI.Bus, *a.PCI.Slot, fn)
}

// pciDevice describes the device of libvirt model key at address a, or
// returns false for a model the table does not know or a device off the PCI
// bus. express holds the buses behind PCI Express ports.
func pciDevice(key string, a *libvirtxml.DomainAddress, express map[uint]bool) (machine.PCIDevice, bool) {
	pm, ok := pciModels[key]
	addr := pciAddress(a)
	if !ok || addr == "" {
		return machine.PCIDevice{}, false
	}
	dev := pm.device
	if pm.virtioType != 0 {
		dev = pm.legacy
		if dev == 0 || express[*a.PCI.Bus] {
			dev = 0x1040 + pm.virtioType
		}
	}
	return machine.PCIDevice{Address: addr, Class: pm.class, VendorID: pm.vendor, DeviceID: dev,
		Vendor: vendorNames[pm.vendor], Name: pm.name}, true
}

// pciOf lists the PCI devices of a definition by address. Bridges and root
// ports (controllers of type pci) are infrastructure and left out, as are
// devices the definition does not place on the PCI bus.
func pciOf(d *libvirtxml.Domain) []machine.PCIDevice {
	dv := d.Devices
	// A bus is the one its controller's index names; QEMU's virtio devices
	// lose their legacy interface on the buses of PCI Express ports.
	express := map[uint]bool{}
	for _, c := range dv.Controllers {
		if c.Type == "pci" && c.Index != nil && (c.Model == "pcie-root-port" || c.Model == "pcie-switch-downstream-port") {
			express[*c.Index] = true
		}
	}
	var out []machine.PCIDevice
	add := func(key string, a *libvirtxml.DomainAddress) {
		if p, ok := pciDevice(key, a, express); ok {
			out = append(out, p)
		}
	}
	for _, in := range dv.Interfaces {
		model := "rtl8139" // libvirt's default for qemu
		if in.Model != nil && in.Model.Type != "" {
			model = in.Model.Type
		}
		add("interface/"+model, in.Address)
	}
	for _, dk := range dv.Disks {
		if dk.Target != nil && dk.Target.Bus == "virtio" {
			add("disk/virtio", dk.Address)
		}
	}
	for _, c := range dv.Controllers {
		key := "controller/" + c.Type
		if c.Type == "usb" && c.Model != "" {
			key += "/" + c.Model
		}
		if c.Type == "scsi" && c.Model != "" && c.Model != "virtio-scsi" {
			continue // an emulated HBA the table does not describe
		}
		add(key, c.Address)
	}
	for _, v := range dv.Videos {
		add("video/"+v.Model.Type, v.Address)
	}
	if b := dv.MemBalloon; b != nil {
		add("memballoon/"+b.Model, b.Address)
	}
	for _, r := range dv.RNGs {
		add("rng/"+r.Model, r.Address)
	}
	for _, in := range dv.Inputs {
		if in.Bus == "virtio" {
			add("input/virtio", in.Address)
		}
	}
	for _, s := range dv.Sounds {
		add("sound/"+s.Model, s.Address)
	}
	for _, w := range dv.Watchdogs {
		add("watchdog/"+w.Model, w.Address)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Address < out[j].Address })
	return out
}
