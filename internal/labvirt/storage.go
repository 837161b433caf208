package labvirt

// The lab's disks: a libvirt directory pool and thin qcow2 volumes in it.
//
//	ensurePool(ctx, l, PoolSpec{Name, Dir, Lab}) (changed bool, err error)
//	deletePool(ctx, l, name, lab string) (deleted bool, err error)
//	ensureVolume(ctx, l, VolumeSpec{Pool, Name, CapacityBytes, Format, Lab}) (path string, changed bool, err error)
//	deleteVolume(ctx, l, pool, name, lab string) (deleted bool, err error)
//
// The path EnsureVolume returns goes into domain.Spec.Disks (format qcow2).
//
// Ownership. Storage pools and volumes have no <metadata> in libvirt 9.0
// (a pool defined with one reads back without it), so the lab's mark is a
// file in the pool's directory, PoolMarkFile:
//
//	<lab xmlns="http://bmlab.dev/xmlns/lab/1" name="LAB" pool="NAME" created-dir="yes">
//	  <volume name="master-0.qcow2"></volume>
//	</lab>
//
// naming the owning lab, whether the lab created the directory, and every
// volume the lab created. A volume is recorded before it is created, so a
// crash in between leaves a recorded volume that the next EnsureVolume
// creates (or finds). libvirt lists every file of a directory pool as a
// volume, the mark too: `virsh vol-list` shows it, these functions skip it.
// Changes to the mark are serialised by flock(2) on the pool's directory.
//
// Because the directory and the mark are read and written by this process,
// libvirtd must run on this host (qemu:///system), as it does for labctl.
//
// Rules, as for networks: a pool with the lab's name but without the lab's
// mark, a pool of another name on the same directory, or an existing
// directory with files and no mark is foreign (ErrPoolForeign) and left
// alone; a volume of the lab's pool that the mark does not list is foreign
// (ErrVolumeForeign). An existing volume of the lab with the same capacity
// and format is kept; a different capacity or format is ErrVolumeMismatch,
// never a silent resize. DeletePool removes the lab's volumes with the pool
// but refuses (ErrPoolInUse) while the pool holds volumes the lab did not
// create; it removes the directory only when the lab created it. Deleting a
// volume a running domain uses is the caller's mistake: delete domains
// first.
//
// qemu runs as an unprivileged user (libvirt-qemu on Debian, or the user
// in /etc/libvirt/qemu.conf) and needs search permission on every directory
// above its disks. EnsurePool creates a missing directory 0755 and checks
// the whole path first, returning ErrNotTraversable with the offending
// directory; POSIX ACLs are not consulted.

import (
	"cmp"
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/digitalocean/go-libvirt"
	"libvirt.org/go/libvirtxml"

	"github.com/bmlab/bmlab/internal/qemuaccess"
)

// PoolMarkFile is the lab's mark in a pool's directory.
const PoolMarkFile = ".bmlab-lab.xml"

var (
	// ErrPoolForeign means a pool or directory has a lab name but is not the lab's.
	ErrPoolForeign = errors.New("storage pool not owned by the lab")
	// ErrPoolInUse means the lab's pool holds volumes the lab did not create.
	ErrPoolInUse = errors.New("storage pool holds volumes the lab did not create")
	// ErrVolumeForeign means a volume in the lab's pool was not created by the lab.
	ErrVolumeForeign = errors.New("storage volume not created by the lab")
	// ErrVolumeMismatch means an existing volume differs from its spec.
	ErrVolumeMismatch = errors.New("storage volume differs from its spec")
	// ErrNotTraversable means qemu could not reach files in a directory.
	ErrNotTraversable = qemuaccess.ErrNotTraversable
)

// PoolSpec declares a directory pool of the lab.
type PoolSpec struct {
	Name string
	Dir  string // absolute
	Lab  string // the owning lab
	// QemuUser is the user qemu runs as, for the permission check; empty
	// means the user set in /etc/libvirt/qemu.conf, else libvirt-qemu.
	QemuUser string
}

// VolumeSpec declares a thin volume in a pool of the lab.
type VolumeSpec struct {
	Pool string
	Name string // a file name: "master-0.qcow2"
	// CapacityBytes is the virtual size. libvirt hands qemu-img whole KiB,
	// so it is rounded up to a multiple of 1024.
	CapacityBytes uint64
	Format        string // "qcow2" (also when empty); nothing else yet
	Lab           string // the owning lab, as in the pool's mark
	// Backing, when set, is a qcow2 image the volume is a thin clone of
	// (copy on write: the image is never written). CapacityBytes must be
	// at least the image's virtual size.
	Backing string
}

// poolMark is the content of PoolMarkFile.
type poolMark struct {
	XMLName    xml.Name         `xml:"http://bmlab.dev/xmlns/lab/1 lab"`
	Name       string           `xml:"name,attr"`
	Pool       string           `xml:"pool,attr"`
	CreatedDir bool             `xml:"created-dir,attr"`
	Volumes    []poolMarkVolume `xml:"volume"`
}

type poolMarkVolume struct {
	Name string `xml:"name,attr"`
}

func (m *poolMark) has(vol string) bool {
	return m != nil && slices.ContainsFunc(m.Volumes, func(v poolMarkVolume) bool { return v.Name == vol })
}

// readPoolMark reads a directory's mark; nil without error when it has none.
func readPoolMark(dir string) (*poolMark, error) {
	b, err := os.ReadFile(filepath.Join(dir, PoolMarkFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the lab's mark: %w", err)
	}
	var m poolMark
	if err := xml.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("read the lab's mark %s: %w", filepath.Join(dir, PoolMarkFile), err)
	}
	return &m, nil
}

// readLabPoolMark reads the mark of a pool that must be the lab's.
func readLabPoolMark(dir, pool, lab string) (*poolMark, error) {
	m, err := readPoolMark(dir)
	if err == nil && (m == nil || m.Name != lab || m.Pool != pool) {
		err = fmt.Errorf("storage pool %q: %s lost the lab's mark meanwhile: %w", pool, dir, ErrPoolForeign)
	}
	return m, err
}

// writePoolMark replaces a directory's mark atomically.
func writePoolMark(dir string, m *poolMark) error {
	b, err := xml.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	p := filepath.Join(dir, PoolMarkFile)
	if err := os.WriteFile(p+".tmp", append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write the lab's mark: %w", err)
	}
	if err := os.Rename(p+".tmp", p); err != nil {
		return fmt.Errorf("write the lab's mark: %w", err)
	}
	return nil
}

// withDirLock runs fn holding an exclusive flock on dir.
func withDirLock(dir string, fn func() error) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		return fmt.Errorf("lock %s: %w", dir, err)
	}
	defer syscall.Flock(int(f.Fd()), syscall.LOCK_UN) //nolint:errcheck // closing unlocks too
	return fn()
}

// poolState is a pool as libvirt has it.
type poolState struct {
	pool              libvirt.StoragePool
	exists            bool
	dir, typ          string
	active, autostart bool
	mark              *poolMark // nil: no mark in dir
}

func getPoolState(ctx context.Context, l *libvirt.Libvirt, name string) (poolState, error) {
	st, err := lookupPool(ctx, l, name)
	if err != nil || !st.exists {
		return st, err
	}
	if st.typ == "dir" && st.dir != "" {
		if st.mark, err = readPoolMark(st.dir); err != nil {
			return st, fmt.Errorf("storage pool %q: %w", name, err)
		}
	}
	return st, nil
}

// lookupPool is a pool as libvirt alone says it (type, directory, active,
// autostart; exists false when there is none). It reads no file.
func lookupPool(ctx context.Context, l *libvirt.Libvirt, name string) (poolState, error) {
	var st poolState
	if err := ctx.Err(); err != nil {
		return st, err
	}
	p, err := l.StoragePoolLookupByName(name)
	if isLibvirtError(err, libvirt.ErrNoStoragePool) {
		return st, nil
	}
	if err != nil {
		return st, fmt.Errorf("look up storage pool %q: %w", name, err)
	}
	st.pool, st.exists = p, true
	return st, st.read(l)
}

// read fills in what libvirt says of st.pool: type, directory, active,
// autostart. It reads no file.
func (st *poolState) read(l *libvirt.Libvirt) error {
	name := st.pool.Name
	x, err := l.StoragePoolGetXMLDesc(st.pool, libvirt.StorageXMLInactive)
	if err != nil {
		return fmt.Errorf("storage pool %q XML: %w", name, err)
	}
	var def libvirtxml.StoragePool
	if err := def.Unmarshal(x); err != nil {
		return fmt.Errorf("storage pool %q XML: %w", name, err)
	}
	st.typ = def.Type
	if def.Target != nil {
		st.dir = def.Target.Path
	}
	active, err := l.StoragePoolIsActive(st.pool)
	if err != nil {
		return fmt.Errorf("storage pool %q: %w", name, err)
	}
	auto, err := l.StoragePoolGetAutostart(st.pool)
	if err != nil {
		return fmt.Errorf("storage pool %q: %w", name, err)
	}
	st.active, st.autostart = active == 1, auto == 1
	return nil
}

// owner returns the lab that owns the pool, or "": the lab named in a mark
// for this pool in the pool's directory.
func (st poolState) owner() string {
	if st.typ != "dir" || st.mark == nil || st.mark.Pool != st.pool.Name {
		return ""
	}
	return st.mark.Name
}

// labPool returns the pool when it is the lab's, else an ErrPoolForeign error.
func labPool(ctx context.Context, l *libvirt.Libvirt, name, lab string) (poolState, error) {
	st, err := getPoolState(ctx, l, name)
	if err != nil || !st.exists {
		return st, err
	}
	if owner := st.owner(); owner != lab {
		return st, fmt.Errorf("storage pool %q (%s pool at %s) has owner %q, not the lab %q (no %s naming it): %w; left alone",
			name, st.typ, st.dir, owner, lab, PoolMarkFile, ErrPoolForeign)
	}
	return st, nil
}

// ensurePool makes the directory (0755, after checking that qemu can reach
// it), marks it as the lab's, defines the pool, starts it and sets it to
// autostart. It returns whether it changed anything.
func ensurePool(ctx context.Context, l *libvirt.Libvirt, spec PoolSpec) (changed bool, err error) {
	if spec.Name == "" || spec.Lab == "" || !filepath.IsAbs(spec.Dir) {
		return false, fmt.Errorf("storage pool %q: want a name, a lab and an absolute directory, have %q", spec.Name, spec.Dir)
	}
	dir := filepath.Clean(spec.Dir)
	st, err := labPool(ctx, l, spec.Name, spec.Lab)
	if errors.Is(err, ErrPoolForeign) {
		return false, fmt.Errorf("%w; remove it (virsh pool-destroy %s; virsh pool-undefine %s) or give the lab another pool name", err, spec.Name, spec.Name)
	}
	if err != nil {
		return false, err
	}
	if st.exists && st.dir != dir {
		return false, fmt.Errorf("storage pool %q of the lab is at %s, not %s: delete it (labctl down, or DeletePool) to move it", spec.Name, st.dir, dir)
	}
	if err := poolDirFree(l, spec.Name, dir); err != nil {
		return false, err
	}
	qemu, err := qemuUser(spec.QemuUser)
	if err != nil {
		return false, err
	}
	if err := qemu.CanTraverse(dir); err != nil {
		return false, err
	}
	created, err := mkdirTraversable(dir)
	if err != nil {
		return false, err
	}
	changed = created
	err = withDirLock(dir, func() error {
		m, err := readPoolMark(dir)
		if err != nil || m != nil && m.Name == spec.Lab && m.Pool == spec.Name {
			return err
		}
		if m != nil {
			return fmt.Errorf("directory %s has the mark of lab %q, pool %q (%s), not lab %q, pool %q: %w",
				dir, m.Name, m.Pool, PoolMarkFile, spec.Lab, spec.Name, ErrPoolForeign)
		}
		if !created {
			if ents, err := os.ReadDir(dir); err != nil || len(ents) > 0 {
				if err == nil {
					err = fmt.Errorf("directory %s already holds %d entries and no %s: %w; give the lab an empty or new directory",
						dir, len(ents), PoolMarkFile, ErrPoolForeign)
				}
				return err
			}
		}
		changed = true
		return writePoolMark(dir, &poolMark{Name: spec.Lab, Pool: spec.Name, CreatedDir: created})
	})
	if err != nil {
		return changed, fmt.Errorf("storage pool %q: %w", spec.Name, err)
	}
	pool := st.pool
	if !st.exists {
		x, err := (&libvirtxml.StoragePool{Type: "dir", Name: spec.Name, Target: &libvirtxml.StoragePoolTarget{
			Path: dir, Permissions: &libvirtxml.StoragePoolTargetPermissions{Mode: "0755"},
		}}).Marshal()
		if err != nil {
			return changed, err
		}
		if pool, err = l.StoragePoolDefineXML(x, 0); err != nil {
			return changed, fmt.Errorf("define storage pool %q at %s: %w", spec.Name, dir, err)
		}
		changed = true
	}
	if !st.active {
		if err := l.StoragePoolCreate(pool, libvirt.StoragePoolCreateNormal); err != nil && !isLibvirtError(err, libvirt.ErrOperationInvalid) {
			return changed, fmt.Errorf("start storage pool %q at %s: %w", spec.Name, dir, err)
		}
		changed = true
	}
	if !st.autostart {
		if err := l.StoragePoolSetAutostart(pool, 1); err != nil {
			return changed, fmt.Errorf("autostart storage pool %q: %w", spec.Name, err)
		}
		changed = true
	}
	if st, err = labPool(ctx, l, spec.Name, spec.Lab); err != nil {
		return changed, err
	}
	if !st.exists || st.typ != "dir" || st.dir != dir || !st.active || !st.autostart {
		return changed, fmt.Errorf("storage pool %q read back: exists %v, type %q, directory %q, active %v, autostart %v; want a %s dir pool, active, autostarted",
			spec.Name, st.exists, st.typ, st.dir, st.active, st.autostart, dir)
	}
	return changed, nil
}

// poolDirFree checks that no pool but the named one uses dir. (libvirt's
// lookup by target path sees only active pools.)
func poolDirFree(l *libvirt.Libvirt, name, dir string) error {
	pools, _, err := l.ConnectListAllStoragePools(1, 0)
	if err != nil {
		return fmt.Errorf("list storage pools: %w", err)
	}
	for _, p := range pools {
		if p.Name == name {
			continue
		}
		x, err := l.StoragePoolGetXMLDesc(p, libvirt.StorageXMLInactive)
		if isLibvirtError(err, libvirt.ErrNoStoragePool) {
			continue // gone meanwhile
		}
		if err != nil {
			return fmt.Errorf("storage pool %q XML: %w", p.Name, err)
		}
		var def libvirtxml.StoragePool
		if err := def.Unmarshal(x); err != nil {
			return fmt.Errorf("storage pool %q XML: %w", p.Name, err)
		}
		if def.Target != nil && filepath.Clean(def.Target.Path) == dir {
			return fmt.Errorf("directory %s is already storage pool %q: %w; give the lab another directory or remove that pool (virsh pool-destroy %s; virsh pool-undefine %s)",
				dir, p.Name, ErrPoolForeign, p.Name, p.Name)
		}
	}
	return nil
}

// mkdirTraversable makes dir and its missing parents 0755 and says whether
// dir was missing (qemuaccess.MkdirTraversable).
func mkdirTraversable(dir string) (bool, error) {
	created, err := qemuaccess.MkdirTraversable(dir)
	if err != nil {
		return created, fmt.Errorf("storage pool directory: %w", err)
	}
	return created, nil
}

// qemuUser looks up the user qemu runs as (qemuaccess.Lookup).
func qemuUser(name string) (qemuaccess.User, error) {
	u, err := qemuaccess.Lookup(name)
	if err != nil {
		return u, fmt.Errorf("%w (set PoolSpec.QemuUser)", err)
	}
	return u, nil
}

// deletePool deletes the lab's pool: its volumes (all of them the lab's),
// the pool, the mark, and the directory when the lab created it. A missing
// pool is no error; a foreign one is ErrPoolForeign, one holding volumes
// the lab did not create is ErrPoolInUse, and both are left as they are.
func deletePool(ctx context.Context, l *libvirt.Libvirt, name, lab string) (deleted bool, err error) {
	st, err := labPool(ctx, l, name, lab)
	if err != nil || !st.exists {
		return false, err
	}
	if !st.active {
		if err := l.StoragePoolCreate(st.pool, libvirt.StoragePoolCreateNormal); err != nil && !isLibvirtError(err, libvirt.ErrOperationInvalid) {
			return false, fmt.Errorf("start storage pool %q to list its volumes: %w", name, err)
		}
	}
	err = withDirLock(st.dir, func() error {
		m, err := readLabPoolMark(st.dir, name, lab)
		if err != nil {
			return err
		}
		if err := l.StoragePoolRefresh(st.pool, 0); err != nil {
			return fmt.Errorf("refresh storage pool %q: %w", name, err)
		}
		vols, _, err := l.StoragePoolListAllVolumes(st.pool, 1, 0)
		if err != nil {
			return fmt.Errorf("list volumes of storage pool %q: %w", name, err)
		}
		var foreign []string
		for _, v := range vols {
			if v.Name != PoolMarkFile && !m.has(v.Name) {
				foreign = append(foreign, v.Name)
			}
		}
		if len(foreign) > 0 {
			return fmt.Errorf("storage pool %q at %s holds %s, which the lab did not create: %w; not deleted (move them away, then delete again)",
				name, st.dir, strings.Join(foreign, ", "), ErrPoolInUse)
		}
		for _, v := range vols {
			if v.Name == PoolMarkFile {
				continue
			}
			if err := l.StorageVolDelete(v, libvirt.StorageVolDeleteNormal); err != nil && !isLibvirtError(err, libvirt.ErrNoStorageVol) {
				return fmt.Errorf("delete volume %q of storage pool %q: %w", v.Name, name, err)
			}
			m.Volumes = slices.DeleteFunc(m.Volumes, func(mv poolMarkVolume) bool { return mv.Name == v.Name })
			if err := writePoolMark(st.dir, m); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return false, err
	}
	if err := l.StoragePoolDestroy(st.pool); err != nil && !isLibvirtError(err, libvirt.ErrOperationInvalid) && !isLibvirtError(err, libvirt.ErrNoStoragePool) {
		return true, fmt.Errorf("stop storage pool %q: %w", name, err)
	}
	if err := l.StoragePoolUndefine(st.pool); err != nil && !isLibvirtError(err, libvirt.ErrNoStoragePool) {
		return true, fmt.Errorf("undefine storage pool %q: %w", name, err)
	}
	if err := os.Remove(filepath.Join(st.dir, PoolMarkFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return true, fmt.Errorf("storage pool %q: remove the lab's mark: %w", name, err)
	}
	if st.mark.CreatedDir {
		if err := os.Remove(st.dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return true, fmt.Errorf("storage pool %q: remove its directory: %w", name, err)
		}
	}
	return true, nil
}

// ensureVolume creates a thin volume (allocation 0) in the lab's pool, or
// keeps the lab's volume of that name when its capacity and format match.
// It returns the volume's path and whether it created it. The pool must be
// the lab's and active (EnsurePool).
func ensureVolume(ctx context.Context, l *libvirt.Libvirt, spec VolumeSpec) (path string, changed bool, err error) {
	format := cmp.Or(spec.Format, "qcow2")
	if format != "qcow2" || spec.CapacityBytes == 0 || !validVolumeName(spec.Name) {
		return "", false, fmt.Errorf("volume %q in pool %q: want a plain file name other than %s, a capacity and format qcow2, have %d bytes, %q",
			spec.Name, spec.Pool, PoolMarkFile, spec.CapacityBytes, spec.Format)
	}
	capacity := (spec.CapacityBytes + 1023) / 1024 * 1024
	st, err := labPool(ctx, l, spec.Pool, spec.Lab)
	if err != nil {
		return "", false, err
	}
	if !st.exists || !st.active {
		return "", false, fmt.Errorf("volume %q: storage pool %q is missing or inactive (EnsurePool first)", spec.Name, spec.Pool)
	}
	err = withDirLock(st.dir, func() error {
		m, err := readLabPoolMark(st.dir, spec.Pool, spec.Lab)
		if err != nil {
			return err
		}
		vol, found, err := lookupVolume(l, st, spec.Name)
		if err != nil {
			return err
		}
		if found {
			if !m.has(spec.Name) {
				return fmt.Errorf("volume %q of storage pool %q is not in the lab's %s: %w; left alone (remove it or choose another name)",
					spec.Name, spec.Pool, PoolMarkFile, ErrVolumeForeign)
			}
			path, err = checkVolume(l, vol, spec.Pool, format, capacity)
			return err
		}
		if !m.has(spec.Name) {
			m.Volumes = append(m.Volumes, poolMarkVolume{Name: spec.Name})
			if err := writePoolMark(st.dir, m); err != nil {
				return err
			}
		}
		v := &libvirtxml.StorageVolume{
			Name:       spec.Name,
			Capacity:   &libvirtxml.StorageVolumeSize{Unit: "bytes", Value: capacity},
			Allocation: &libvirtxml.StorageVolumeSize{Unit: "bytes", Value: 0},
			Target:     &libvirtxml.StorageVolumeTarget{Format: &libvirtxml.StorageVolumeTargetFormat{Type: format}},
		}
		if spec.Backing != "" {
			v.BackingStore = &libvirtxml.StorageVolumeBackingStore{Path: spec.Backing, Format: &libvirtxml.StorageVolumeTargetFormat{Type: "qcow2"}}
		}
		x, err := v.Marshal()
		if err != nil {
			return err
		}
		if vol, err = l.StorageVolCreateXML(st.pool, x, 0); err != nil {
			return fmt.Errorf("create volume %q (%d bytes, %s) in storage pool %q: %w", spec.Name, capacity, format, spec.Pool, err)
		}
		changed = true
		path, err = checkVolume(l, vol, spec.Pool, format, capacity)
		return err
	})
	return path, changed, err
}

func validVolumeName(name string) bool {
	return name != "" && name != "." && name != ".." && !strings.ContainsRune(name, '/') &&
		name != PoolMarkFile && name != PoolMarkFile+".tmp"
}

// lookupVolume finds a volume by name, refreshing the pool first when a
// file of that name exists that libvirt does not list yet (created behind
// its back): libvirt's qemu-img would overwrite it.
func lookupVolume(l *libvirt.Libvirt, st poolState, name string) (libvirt.StorageVol, bool, error) {
	vol, err := l.StorageVolLookupByName(st.pool, name)
	if err == nil {
		return vol, true, nil
	}
	if !isLibvirtError(err, libvirt.ErrNoStorageVol) {
		return vol, false, fmt.Errorf("look up volume %q in storage pool %q: %w", name, st.pool.Name, err)
	}
	if _, serr := os.Lstat(filepath.Join(st.dir, name)); errors.Is(serr, fs.ErrNotExist) {
		return vol, false, nil
	}
	if err := l.StoragePoolRefresh(st.pool, 0); err != nil {
		return vol, false, fmt.Errorf("refresh storage pool %q: %w", st.pool.Name, err)
	}
	vol, err = l.StorageVolLookupByName(st.pool, name)
	if err != nil {
		return vol, false, fmt.Errorf("%s exists but libvirt does not list it as a volume of storage pool %q: %w", filepath.Join(st.dir, name), st.pool.Name, err)
	}
	return vol, true, nil
}

// checkVolume compares a volume with its spec and returns its path.
func checkVolume(l *libvirt.Libvirt, vol libvirt.StorageVol, pool, format string, capacity uint64) (string, error) {
	x, err := l.StorageVolGetXMLDesc(vol, 0)
	if err != nil {
		return "", fmt.Errorf("volume %q of storage pool %q XML: %w", vol.Name, pool, err)
	}
	var v libvirtxml.StorageVolume
	if err := v.Unmarshal(x); err != nil {
		return "", fmt.Errorf("volume %q of storage pool %q XML: %w", vol.Name, pool, err)
	}
	var have string
	if v.Target != nil && v.Target.Format != nil {
		have = v.Target.Format.Type
	}
	var haveCap uint64
	if v.Capacity != nil {
		haveCap = v.Capacity.Value // libvirt reports bytes
	}
	if have != format || haveCap != capacity {
		return "", fmt.Errorf("volume %q of storage pool %q is %s with %d bytes, the spec wants %s with %d bytes: %w; the lab never resizes or converts a disk: delete the volume (DeleteVolume) or change the spec",
			vol.Name, pool, orNetworkNone(have), haveCap, format, capacity, ErrVolumeMismatch)
	}
	path, err := l.StorageVolGetPath(vol)
	if err != nil {
		return "", fmt.Errorf("path of volume %q of storage pool %q: %w", vol.Name, pool, err)
	}
	return path, nil
}

// deleteVolume deletes a volume the lab created in its pool; a missing pool
// or volume is no error. A volume the lab did not create is
// ErrVolumeForeign and stays.
func deleteVolume(ctx context.Context, l *libvirt.Libvirt, pool, name, lab string) (deleted bool, err error) {
	st, err := labPool(ctx, l, pool, lab)
	if err != nil || !st.exists {
		return false, err
	}
	if !validVolumeName(name) {
		return false, fmt.Errorf("volume %q: not a volume name", name)
	}
	err = withDirLock(st.dir, func() error {
		m, err := readLabPoolMark(st.dir, pool, lab)
		if err != nil {
			return err
		}
		_, serr := os.Lstat(filepath.Join(st.dir, name))
		switch {
		case errors.Is(serr, fs.ErrNotExist):
			// Gone already (or never created): forget it.
		case serr != nil:
			return serr
		case !m.has(name):
			return fmt.Errorf("volume %q of storage pool %q is not in the lab's %s: %w; left alone", name, pool, PoolMarkFile, ErrVolumeForeign)
		case !st.active:
			return fmt.Errorf("volume %q: storage pool %q is inactive; start it (EnsurePool) to delete the volume", name, pool)
		default:
			vol, found, err := lookupVolume(l, st, name)
			if err != nil {
				return err
			}
			if found {
				if err := l.StorageVolDelete(vol, libvirt.StorageVolDeleteNormal); err != nil && !isLibvirtError(err, libvirt.ErrNoStorageVol) {
					return fmt.Errorf("delete volume %q of storage pool %q: %w", name, pool, err)
				}
				deleted = true
			}
		}
		if m.has(name) {
			m.Volumes = slices.DeleteFunc(m.Volumes, func(v poolMarkVolume) bool { return v.Name == name })
			return writePoolMark(st.dir, m)
		}
		return nil
	})
	return deleted, err
}

func isLibvirtError(err error, code libvirt.ErrorNumber) bool { return isNetworkError(err, code) }
