package virt

import (
	"strings"

	"libvirt.org/go/libvirtxml"

	"github.com/bmlab/bmlab/internal/machine"
)

// orderDevices gives the devices of plan their boot order in d (libvirt's
// per-device <boot order='N'/>, which the firmware's boot order follows:
// SeaBIOS's bootorder file, OVMF's BootOrder). Devices not in the plan get
// none, and do not boot. A NIC's PXE and HTTP options are the same device
// for libvirt: the first of them places it.
func orderDevices(d *libvirtxml.Domain, plan []machine.BootOption) {
	n := uint(0)
	for _, o := range plan {
		if o.NIC {
			for i, in := range d.Devices.Interfaces {
				if in.MAC != nil && strings.EqualFold(in.MAC.Address, o.Device) && in.Boot == nil {
					n++
					d.Devices.Interfaces[i].Boot = &libvirtxml.DomainDeviceBoot{Order: n}
				}
			}
			continue
		}
		for i, dk := range d.Devices.Disks {
			if targetDev(dk) == o.Device && dk.Boot == nil {
				n++
				d.Devices.Disks[i].Boot = &libvirtxml.DomainDeviceBoot{Order: n}
			}
		}
	}
}

// bootKinds maps os/boot device names onto the model's kinds of boot
// device.
func bootKinds(devs []string) []machine.BootSource {
	var out []machine.BootSource
	for _, d := range devs {
		switch d {
		case "hd":
			out = append(out, machine.BootHdd)
		case "cdrom":
			out = append(out, machine.BootCd)
		case "network":
			out = append(out, machine.BootPxe)
		}
	}
	return out
}
