package virt

import (
	"fmt"
	"slices"
	"strings"

	"github.com/digitalocean/go-libvirt"
	"libvirt.org/go/libvirtxml"

	"github.com/bmlab/bmlab/internal/machine"
)

// RAID volumes (machine.Volume) are thin qcow2 volumes made in the storage
// pool of the domain's first disk, named <domain>-volume-<id>.qcow2, and
// attached to the persistent definition: the machine sees them at its next
// boot. A deleted volume's disk is detached at once and its file removed
// when the domain is off, else at its next start (the metadata keeps the
// path until then).

// makeVolumes gives every volume without a disk one, in the pool of the
// domain's first disk.
func (b *Backend) makeVolumes(l *libvirt.Libvirt, name string, def *libvirtxml.Domain, vs []machine.Volume) error {
	var pool *libvirt.StoragePool
	for i := range vs {
		if vs[i].Path != "" {
			continue
		}
		if pool == nil {
			p, err := firstDiskPool(l, def)
			if err != nil {
				return fmt.Errorf("%w: a volume's disk is made in the storage pool of the domain's first disk: %v", machine.ErrUnsupported, err)
			}
			pool = &p
		}
		vol, err := createVolume(l, *pool, fmt.Sprintf("%s-volume-%s", name, vs[i].ID), vs[i].CapacityBytes)
		if err != nil {
			return fmt.Errorf("create the disk of volume %s: %w", vs[i].ID, err)
		}
		if vs[i].Path, err = l.StorageVolGetPath(vol); err != nil {
			return fmt.Errorf("the path of volume %s: %w", vs[i].ID, err)
		}
	}
	return nil
}

// volumeNames is how many names createVolume tries.
const volumeNames = 100

// createVolume makes a thin qcow2 volume named base.qcow2 in pool, or, when
// that name is taken (a file left in the pool by an earlier domain of the
// same name, which is not ours to remove or overwrite), base-2.qcow2,
// base-3.qcow2 and so on (issue 32: the taken name was a 500). The pool is
// refreshed first, so that a file it has not listed yet counts as taken.
func createVolume(l *libvirt.Libvirt, pool libvirt.StoragePool, base string, capacity int64) (libvirt.StorageVol, error) {
	if err := l.StoragePoolRefresh(pool, 0); err != nil {
		return libvirt.StorageVol{}, fmt.Errorf("refresh the pool: %w", err)
	}
	for n := 1; n <= volumeNames; n++ {
		vname := base + ".qcow2"
		if n > 1 {
			vname = fmt.Sprintf("%s-%d.qcow2", base, n)
		}
		if _, err := l.StorageVolLookupByName(pool, vname); err == nil {
			continue // taken
		}
		xml := fmt.Sprintf("<volume><name>%s</name><capacity unit='bytes'>%d</capacity>"+
			"<target><format type='qcow2'/></target></volume>", vname, capacity)
		vol, err := l.StorageVolCreateXML(pool, xml, 0)
		if IsCode(err, libvirt.ErrStorageVolExist) {
			continue // taken meanwhile
		}
		return vol, err
	}
	return libvirt.StorageVol{}, fmt.Errorf("%w: the names %s.qcow2 to %s-%d.qcow2 are all taken in the pool; remove the files left there",
		machine.ErrConflict, base, base, volumeNames)
}

func firstDiskPool(l *libvirt.Libvirt, def *libvirtxml.Domain) (libvirt.StoragePool, error) {
	for _, dk := range def.Devices.Disks {
		if dk.Device != "" && dk.Device != "disk" {
			continue
		}
		src := diskSource(dk)
		if src == "" {
			continue
		}
		vol, err := l.StorageVolLookupByPath(src)
		if err != nil {
			return libvirt.StoragePool{}, fmt.Errorf("%s is in no storage pool", src)
		}
		return l.StoragePoolLookupByVolume(vol)
	}
	return libvirt.StoragePool{}, fmt.Errorf("the domain has no disk")
}

// attachVolumes makes the definition's volume disks what vs says: each
// volume's disk attached (on the first disk's bus, the next free name),
// the disks of volumes no longer there (gone) detached.
func attachVolumes(def *libvirtxml.Domain, vs []machine.Volume, gone []string) {
	if def.Devices == nil {
		def.Devices = &libvirtxml.DomainDeviceList{}
	}
	def.Devices.Disks = slices.DeleteFunc(def.Devices.Disks, func(dk libvirtxml.DomainDisk) bool {
		return slices.Contains(gone, diskSource(dk))
	})
	bus, prefix := "virtio", "vd"
	for _, dk := range def.Devices.Disks {
		if (dk.Device == "" || dk.Device == "disk") && dk.Target != nil {
			bus, prefix = dk.Target.Bus, dk.Target.Dev[:2]
			break
		}
	}
	for _, v := range vs {
		if v.Path == "" || slices.ContainsFunc(def.Devices.Disks, func(dk libvirtxml.DomainDisk) bool { return diskSource(dk) == v.Path }) {
			continue
		}
		def.Devices.Disks = append(def.Devices.Disks, libvirtxml.DomainDisk{
			Device: "disk",
			Driver: &libvirtxml.DomainDiskDriver{Name: "qemu", Type: "qcow2"},
			Source: &libvirtxml.DomainDiskSource{File: &libvirtxml.DomainDiskSourceFile{File: v.Path}},
			Target: &libvirtxml.DomainDiskTarget{Dev: freeDev(def, prefix), Bus: bus},
			Serial: "bmlab-volume-" + v.ID,
		})
	}
}

// freeDev is the first device name with prefix no disk uses.
func freeDev(def *libvirtxml.Domain, prefix string) string {
	for c := 'a'; c <= 'z'; c++ {
		name := prefix + string(c)
		if !slices.ContainsFunc(def.Devices.Disks, func(dk libvirtxml.DomainDisk) bool { return dk.Target != nil && dk.Target.Dev == name }) {
			return name
		}
	}
	return prefix + "zz"
}

// goneVolumes are the disk paths of volumes in old that are not in vs.
func goneVolumes(old, vs []machine.Volume) []string {
	var gone []string
	for _, o := range old {
		if o.Path != "" && !slices.ContainsFunc(vs, func(v machine.Volume) bool { return v.Path == o.Path }) {
			gone = append(gone, o.Path)
		}
	}
	return gone
}

// removeDisks deletes volume files; a file already gone is fine.
func removeDisks(l *libvirt.Libvirt, paths []string) error {
	var errs []string
	for _, p := range paths {
		vol, err := l.StorageVolLookupByPath(p)
		if err != nil {
			continue // gone already, or never in a pool
		}
		if err := l.StorageVolDelete(vol, 0); err != nil {
			errs = append(errs, fmt.Sprintf("%s: %v", p, err))
		}
	}
	if errs != nil {
		return fmt.Errorf("remove volume disks: %s", strings.Join(errs, "; "))
	}
	return nil
}
