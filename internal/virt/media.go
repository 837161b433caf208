package virt

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/digitalocean/go-libvirt"
	"go.uber.org/zap"
	"libvirt.org/go/libvirtxml"

	"github.com/bmlab/bmlab/internal/machine"
)

// usbStickDev is the target of the removable medium when the domain has no
// floppy drive.
const usbStickDev = "sdy"

// CDROMBus is the bus a CD-ROM drive belongs on for a machine type: IDE
// on pc (i440fx), virtio-scsi on aarch64's virt (which has neither IDE nor
// SATA), SATA on q35 and the rest.
func CDROMBus(machineType string) string {
	switch {
	case machineType == "pc" || strings.HasPrefix(machineType, "pc-i440fx"):
		return "ide"
	case strings.HasPrefix(machineType, "virt"):
		return "scsi"
	}
	return "sata"
}

// CDROMDev is the target name of a defined domain's CD-ROM drive on a bus:
// hdc on IDE, sda on SCSI (the first unit of the first controller; the
// disks are virtio's vdX), sdz on SATA (after any SATA disks).
func CDROMDev(bus string) string {
	switch bus {
	case "ide":
		return "hdc"
	case "scsi":
		return "sda"
	}
	return "sdz"
}

// SCSIController is the controller a SCSI CD-ROM drive hangs off: virtio-scsi,
// which UEFI (OVMF, AAVMF) boots from. libvirt would pick an LSI one for an
// aarch64 machine, which AAVMF has no driver for.
func SCSIController() libvirtxml.DomainController {
	zero := uint(0)
	return libvirtxml.DomainController{Type: "scsi", Index: &zero, Model: "virtio-scsi"}
}

// SetMedia implements machine.Backend. The CD drive (and a floppy drive,
// when the domain has one) changes media with DomainUpdateDeviceFlags, live
// and persistent on a running domain, persistent only on a stopped one; an
// empty source ejects and keeps the drive. The removable medium otherwise is
// a USB disk that is attached with its image and detached on eject.
func (b *Backend) SetMedia(_ context.Context, id string, slot machine.MediaSlot, src string) error {
	l, e, err := b.op(id)
	if err != nil {
		return err
	}
	var def libvirtxml.Domain
	if err := def.Unmarshal(e.xmlDef); err != nil {
		return fmt.Errorf("parse domain XML of %s: %w", e.m.Name, err)
	}
	// Whether it runs is libvirt's word, not the cache's: a domain started
	// outside vbmcd a moment ago (an installer's reboot, virsh start) may
	// not have reached the cache yet, and a change made to its definition
	// alone would leave the medium in the running machine.
	running := e.m.Power != machine.PowerOff
	if st, _, err := l.DomainGetState(e.dom, 0); err == nil {
		running = libvirt.DomainState(st) != libvirt.DomainShutoff
	}
	flags := libvirt.DomainDeviceModifyConfig
	if running {
		flags |= libvirt.DomainDeviceModifyLive
	}
	var disk *libvirtxml.DomainDisk
	var usb *libvirtxml.DomainDisk
	for i := range def.Devices.Disks {
		d := &def.Devices.Disks[i]
		switch {
		case slot == machine.SlotCD && d.Device == "cdrom" && disk == nil:
			disk = d
		case slot == machine.SlotRemovable && d.Device == "floppy" && disk == nil:
			disk = d
		case slot == machine.SlotRemovable && d.Target != nil && d.Target.Bus == "usb" && usb == nil:
			usb = d
		}
	}
	switch {
	case disk != nil:
		if diskSource(*disk) == src {
			return nil
		}
		c := *disk
		c.Source = nil
		if src != "" {
			c.Source = &libvirtxml.DomainDiskSource{File: &libvirtxml.DomainDiskSourceFile{File: src}}
			c.Driver = &libvirtxml.DomainDiskDriver{Name: "qemu", Type: "raw"}
		}
		c.ReadOnly = &libvirtxml.DomainDiskReadOnly{}
		x, err := c.Marshal()
		if err != nil {
			return fmt.Errorf("encode %s drive of %s: %w", slot, e.m.Name, err)
		}
		f := flags
		if running && src == "" {
			f |= libvirt.DomainDeviceModifyForce // eject even when the guest locked the tray
		}
		err = l.DomainUpdateDeviceFlags(e.dom, x, f)
		return b.done(l, e, err, "change "+string(slot)+" media of")
	case slot == machine.SlotCD && src == "":
		return nil // no drive, nothing in it
	case slot == machine.SlotCD && running:
		return fmt.Errorf("%w: %s has no CD-ROM drive, and a drive cannot be plugged into a running machine (IDE and SATA do not hot-plug); power it off and insert again: vbmcd then adds one, as a BMC always has its virtual drive", machine.ErrUnsupported, e.m.Name)
	case slot == machine.SlotCD:
		// A BMC always has its virtual CD drive: give the domain one, for
		// good, on the bus its machine type has (with a virtio-scsi
		// controller for it on aarch64's virt, which has no IDE or SATA).
		bus := CDROMBus(machineType(&def))
		prefix := "sd"
		if bus == "ide" {
			prefix = "hd"
		}
		if bus == "scsi" && !slices.ContainsFunc(def.Devices.Controllers, func(c libvirtxml.DomainController) bool { return c.Type == "scsi" }) {
			ctl := SCSIController()
			x, err := ctl.Marshal()
			if err != nil {
				return fmt.Errorf("encode the SCSI controller of %s: %w", e.m.Name, err)
			}
			if err := l.DomainAttachDeviceFlags(e.dom, x, uint32(libvirt.DomainDeviceModifyConfig)); err != nil {
				return b.done(l, e, err, "add a SCSI controller to")
			}
		}
		cd := libvirtxml.DomainDisk{
			Device:   "cdrom",
			Driver:   &libvirtxml.DomainDiskDriver{Name: "qemu", Type: "raw"},
			Source:   &libvirtxml.DomainDiskSource{File: &libvirtxml.DomainDiskSourceFile{File: src}},
			Target:   &libvirtxml.DomainDiskTarget{Dev: freeDev(&def, prefix), Bus: bus},
			ReadOnly: &libvirtxml.DomainDiskReadOnly{},
		}
		x, err := cd.Marshal()
		if err != nil {
			return fmt.Errorf("encode the CD drive of %s: %w", e.m.Name, err)
		}
		err = l.DomainAttachDeviceFlags(e.dom, x, uint32(libvirt.DomainDeviceModifyConfig))
		if err == nil {
			b.log.Info("added a CD-ROM drive for virtual media", zap.String("domain", e.m.Name), zap.String("bus", bus))
		}
		return b.done(l, e, err, "add a CD-ROM drive to")
	}
	// The USB stick: plug in, swap, or pull out.
	if usb != nil {
		if diskSource(*usb) == src {
			return nil
		}
		x, err := usb.Marshal()
		if err != nil {
			return fmt.Errorf("encode USB disk of %s: %w", e.m.Name, err)
		}
		if err := l.DomainDetachDeviceFlags(e.dom, x, uint32(flags)); err != nil {
			return b.done(l, e, err, "unplug the USB medium of")
		}
		if src == "" {
			return b.done(l, e, nil, "")
		}
	}
	if src == "" {
		return nil
	}
	stick := libvirtxml.DomainDisk{
		Device:   "disk",
		Driver:   &libvirtxml.DomainDiskDriver{Name: "qemu", Type: "raw"},
		Source:   &libvirtxml.DomainDiskSource{File: &libvirtxml.DomainDiskSourceFile{File: src}},
		Target:   &libvirtxml.DomainDiskTarget{Dev: usbStickDev, Bus: "usb", Removable: "on"},
		ReadOnly: &libvirtxml.DomainDiskReadOnly{},
	}
	x, err := stick.Marshal()
	if err != nil {
		return fmt.Errorf("encode USB disk of %s: %w", e.m.Name, err)
	}
	err = l.DomainAttachDeviceFlags(e.dom, x, uint32(flags))
	return b.done(l, e, err, "plug a USB medium into")
}
