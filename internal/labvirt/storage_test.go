package labvirt

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/digitalocean/go-libvirt"
	"libvirt.org/go/libvirtxml"

	"github.com/bmlab/bmlab/internal/netplumb/netnstest"
	"github.com/bmlab/bmlab/internal/testenv"
	"github.com/bmlab/bmlab/internal/virt"
	"github.com/bmlab/bmlab/internal/virt/domain"
)

func TestStorage(t *testing.T) {
	l := ltCleanConn(t)
	ctx := context.Background()
	lab := labNetTestLab
	dir := filepath.Join(testenv.TmpDir(t, "lt-pool-", 0o755), "lab", "pool")
	pool := PoolSpec{Name: "lt-pool-" + netnstest.Rand(3), Dir: dir, Lab: lab}
	t.Cleanup(func() {
		if _, err := deletePool(context.Background(), l, pool.Name, lab); err != nil {
			t.Errorf("clean up: %v", err)
		}
	})

	if changed, err := ensurePool(ctx, l, pool); err != nil || !changed {
		t.Fatalf("first EnsurePool = %v, %v; want changed", changed, err)
	}
	if changed, err := ensurePool(ctx, l, pool); err != nil || changed {
		t.Fatalf("second EnsurePool = %v, %v; want unchanged", changed, err)
	}
	for _, d := range []string{filepath.Dir(dir), dir} {
		if fi, err := os.Stat(d); err != nil || fi.Mode().Perm() != 0o755 {
			t.Errorf("%s: %v, %v; want a 0755 directory", d, fi.Mode(), err)
		}
	}
	m, err := readPoolMark(dir)
	if err != nil || m == nil || m.Name != lab || m.Pool != pool.Name || !m.CreatedDir {
		t.Fatalf("mark %+v, %v", m, err)
	}

	const gib = 1 << 30
	vols := []VolumeSpec{
		{Pool: pool.Name, Name: "master-0.qcow2", CapacityBytes: 20 * gib, Lab: lab},
		{Pool: pool.Name, Name: "master-0-data.qcow2", CapacityBytes: gib + 1, Format: "qcow2", Lab: lab}, // rounded up to KiB
	}
	paths := map[string]string{}
	for _, v := range vols {
		path, changed, err := ensureVolume(ctx, l, v)
		if err != nil || !changed || path != filepath.Join(dir, v.Name) {
			t.Fatalf("ensureVolume(%s) = %q, %v, %v; want a new volume in %s", v.Name, path, changed, err, dir)
		}
		paths[v.Name] = path
		vol, err := l.StorageVolLookupByPath(path)
		if err != nil {
			t.Fatal(err)
		}
		_, capacity, alloc, err := l.StorageVolGetInfo(vol)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: capacity %d, allocation %d", v.Name, capacity, alloc)
		if want := (v.CapacityBytes + 1023) / 1024 * 1024; capacity != want || alloc > 1<<20 {
			t.Errorf("%s: capacity %d, allocation %d; want capacity %d, thin (allocation under 1 MiB)", v.Name, capacity, alloc, want)
		}
		if b, err := os.ReadFile(path); err != nil || !strings.HasPrefix(string(b), "QFI\xfb") {
			t.Errorf("%s is not a qcow2 image (%v)", path, err)
		}
	}
	for _, v := range vols {
		if path, changed, err := ensureVolume(ctx, l, v); err != nil || changed || path != paths[v.Name] {
			t.Errorf("ensureVolume(%s) again = %q, %v, %v; want the same path, unchanged", v.Name, path, changed, err)
		}
	}
	if changed, err := ensurePool(ctx, l, pool); err != nil || changed {
		t.Errorf("EnsurePool with volumes = %v, %v; want unchanged", changed, err)
	}

	// qemu can open the volume through the path: a VM with it as its disk starts.
	storageTestStartVM(t, l, paths["master-0.qcow2"])

	bigger := vols[0]
	bigger.CapacityBytes = 40 * gib
	if _, _, err := ensureVolume(ctx, l, bigger); !errors.Is(err, ErrVolumeMismatch) {
		t.Errorf("EnsureVolume with another capacity = %v, want ErrVolumeMismatch", err)
	}
	raw := vols[0]
	raw.Format = "raw"
	if _, _, err := ensureVolume(ctx, l, raw); err == nil {
		t.Error("EnsureVolume with format raw: no error")
	}
	if vol, err := l.StorageVolLookupByPath(paths[vols[0].Name]); err != nil {
		t.Errorf("the volume is gone after a refused resize: %v", err)
	} else if _, capacity, _, err := l.StorageVolGetInfo(vol); err != nil || capacity != vols[0].CapacityBytes {
		t.Errorf("capacity after a refused resize: %d, %v", capacity, err)
	}

	// Someone else's file in the lab's pool.
	foreign := filepath.Join(dir, "foreign.img")
	if err := os.WriteFile(foreign, []byte("not the lab's"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := ensureVolume(ctx, l, VolumeSpec{Pool: pool.Name, Name: "foreign.img", CapacityBytes: gib, Lab: lab}); !errors.Is(err, ErrVolumeForeign) {
		t.Errorf("EnsureVolume over a foreign file = %v, want ErrVolumeForeign", err)
	}
	if _, err := deleteVolume(ctx, l, pool.Name, "foreign.img", lab); !errors.Is(err, ErrVolumeForeign) {
		t.Errorf("DeleteVolume of a foreign file = %v, want ErrVolumeForeign", err)
	}
	if _, err := deletePool(ctx, l, pool.Name, lab); !errors.Is(err, ErrPoolInUse) || !strings.Contains(err.Error(), "foreign.img") {
		t.Errorf("DeletePool with a foreign file = %v, want ErrPoolInUse naming it", err)
	}
	for _, p := range append([]string{foreign}, paths[vols[0].Name], paths[vols[1].Name]) {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("after the refused delete: %v", err)
		}
	}
	if b, err := os.ReadFile(foreign); err != nil || string(b) != "not the lab's" {
		t.Errorf("the foreign file changed: %q, %v", b, err)
	}
	if err := os.Remove(foreign); err != nil {
		t.Fatal(err)
	}

	if deleted, err := deleteVolume(ctx, l, pool.Name, vols[1].Name, lab); err != nil || !deleted {
		t.Errorf("DeleteVolume = %v, %v; want deleted", deleted, err)
	}
	if deleted, err := deleteVolume(ctx, l, pool.Name, vols[1].Name, lab); err != nil || deleted {
		t.Errorf("DeleteVolume again = %v, %v; want nothing to delete", deleted, err)
	}
	if _, err := os.Stat(paths[vols[1].Name]); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("deleted volume's file: %v", err)
	}
	if deleted, err := deletePool(ctx, l, pool.Name, lab); err != nil || !deleted {
		t.Fatalf("DeletePool = %v, %v; want deleted", deleted, err)
	}
	if deleted, err := deletePool(ctx, l, pool.Name, lab); err != nil || deleted {
		t.Errorf("DeletePool again = %v, %v; want nothing to delete", deleted, err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the pool's directory, which the lab made, is still there: %v", err)
	}
	if _, err := os.Stat(filepath.Dir(dir)); err != nil {
		t.Errorf("the parent of the pool's directory is gone: %v", err)
	}
	if deleted, err := deleteVolume(ctx, l, pool.Name, vols[0].Name, lab); err != nil || deleted {
		t.Errorf("DeleteVolume in a deleted pool = %v, %v; want nothing to delete", deleted, err)
	}
}

// storageTestStartVM starts a throwaway VM with the volume as its disk and
// waits until it runs.
func storageTestStartVM(t *testing.T, l *libvirt.Libvirt, disk string) {
	t.Helper()
	spec := domain.Spec{Name: "lt-vm-" + netnstest.Rand(3), MemoryMiB: 128, VCPUs: 1, Disks: []domain.Disk{{Path: disk}}}
	x, err := spec.XML(virt.Firmware{})
	if err != nil {
		t.Fatal(err)
	}
	dom, err := l.DomainCreateXML(x, libvirt.DomainStartAutodestroy)
	if err != nil {
		t.Fatalf("start a VM on %s: %v", disk, err)
	}
	defer func() {
		if err := l.DomainDestroy(dom); err != nil && !networkTestDomainGone(err) {
			t.Errorf("destroy VM: %v", err)
		}
	}()
	if !testenv.WaitFor(10*time.Second, func() bool {
		st, _, err := l.DomainGetState(dom, 0)
		return err == nil && libvirt.DomainState(st) == libvirt.DomainRunning
	}) {
		t.Fatalf("VM on %s does not run", disk)
	}
}

func TestEnsurePoolRefusesForeignAndUntraversable(t *testing.T) {
	l := ltCleanConn(t)
	ctx := context.Background()
	lab := labNetTestLab
	name := "lt-fpool-" + netnstest.Rand(3)

	// Someone else's pool with the lab's pool name, on a directory without
	// the lab's mark.
	theirs := testenv.TmpDir(t, "lt-pool-", 0o755)
	x, err := (&libvirtxml.StoragePool{Type: "dir", Name: name, Target: &libvirtxml.StoragePoolTarget{Path: theirs}}).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	p, err := l.StoragePoolDefineXML(x, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.StoragePoolUndefine(p) })
	mine := filepath.Join(testenv.TmpDir(t, "lt-pool-", 0o755), "pool")
	if _, err := ensurePool(ctx, l, PoolSpec{Name: name, Dir: mine, Lab: lab}); !errors.Is(err, ErrPoolForeign) || !strings.Contains(err.Error(), "virsh pool-undefine "+name) {
		t.Errorf("EnsurePool over a foreign pool = %v, want ErrPoolForeign with a fix", err)
	}
	if _, err := ensurePool(ctx, l, PoolSpec{Name: name + "-2", Dir: theirs, Lab: lab}); !errors.Is(err, ErrPoolForeign) || !strings.Contains(err.Error(), `storage pool "`+name+`"`) {
		t.Errorf("EnsurePool on a foreign pool's directory = %v, want ErrPoolForeign naming it", err)
	}
	if _, err := deletePool(ctx, l, name, lab); !errors.Is(err, ErrPoolForeign) {
		t.Errorf("DeletePool of a foreign pool = %v, want ErrPoolForeign", err)
	}
	if _, _, err := ensureVolume(ctx, l, VolumeSpec{Pool: name, Name: "x.qcow2", CapacityBytes: 1 << 20, Lab: lab}); !errors.Is(err, ErrPoolForeign) {
		t.Errorf("EnsureVolume in a foreign pool = %v, want ErrPoolForeign", err)
	}
	if after, err := l.StoragePoolGetXMLDesc(p, libvirt.StorageXMLInactive); err != nil || !strings.Contains(after, theirs) {
		t.Errorf("the foreign pool changed: %v\n%s", err, after)
	}
	if ents, _ := os.ReadDir(theirs); len(ents) != 0 {
		t.Errorf("the foreign pool's directory got %d entries", len(ents))
	}
	if _, err := os.Stat(mine); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("EnsurePool made %s for a refused pool: %v", mine, err)
	}

	// A directory with files and no mark is not adopted.
	full := testenv.TmpDir(t, "lt-pool-", 0o755)
	if err := os.WriteFile(filepath.Join(full, "disk.img"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ensurePool(ctx, l, PoolSpec{Name: name + "-3", Dir: full, Lab: lab}); !errors.Is(err, ErrPoolForeign) {
		t.Errorf("EnsurePool on a directory with files = %v, want ErrPoolForeign", err)
	}

	// A pool under a 0700 directory: qemu could not reach its disks.
	closed := testenv.TmpDir(t, "lt-pool-", 0o700)
	under := filepath.Join(closed, "pool")
	_, err = ensurePool(ctx, l, PoolSpec{Name: name + "-4", Dir: under, Lab: lab})
	if !errors.Is(err, ErrNotTraversable) || !strings.Contains(err.Error(), closed+" (mode 0700") || !strings.Contains(err.Error(), "Permission denied") {
		t.Errorf("EnsurePool under a 0700 directory = %v, want ErrNotTraversable naming %s", err, closed)
	}
	if _, err := os.Stat(under); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("EnsurePool made %s under a 0700 directory: %v", under, err)
	}
	for _, n := range []string{name + "-2", name + "-3", name + "-4"} {
		if _, err := l.StoragePoolLookupByName(n); err == nil {
			t.Errorf("a refused EnsurePool defined pool %s", n)
		}
	}
}
