package virt

import (
	"context"
	"fmt"

	"github.com/digitalocean/go-libvirt"
	"libvirt.org/go/libvirtxml"

	"github.com/bmlab/bmlab/internal/machine"
)

// usbStickDev is the target of the removable medium when the domain has no
// floppy drive.
const usbStickDev = "sdy"

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
	running := e.m.Power != machine.PowerOff
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
	case slot == machine.SlotCD:
		return fmt.Errorf("%w: %s has no CD-ROM drive", machine.ErrUnsupported, e.m.Name)
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
