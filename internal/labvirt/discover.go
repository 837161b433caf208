package labvirt

// Discovery: what bears a lab's mark, found without the lab's state file,
// for `labctl down` after the lab's directory is gone.

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"

	"github.com/digitalocean/go-libvirt"
	"libvirt.org/go/libvirtxml"

	"github.com/bmlab/bmlab/internal/virt/domain"
)

// markedDomains lists the domains (running or not) that bear lab's mark.
func markedDomains(ctx context.Context, l *libvirt.Libvirt, lab string) ([]string, error) {
	marks, err := domainMarks(ctx, l)
	if err != nil {
		return nil, err
	}
	var out []string
	for name, m := range marks {
		if m["name"] == lab {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out, nil
}

// domainMarks returns the mark's attributes of every domain that has one,
// by domain name, whichever lab it is.
func domainMarks(ctx context.Context, l *libvirt.Libvirt) (map[string]map[string]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	doms, _, err := l.ConnectListAllDomains(1, 0)
	if err != nil {
		return nil, fmt.Errorf("list domains: %w", err)
	}
	out := map[string]map[string]string{}
	for _, d := range doms {
		x, err := l.DomainGetXMLDesc(d, libvirt.DomainXMLInactive)
		if domain.IsNoDomain(err) {
			continue // gone meanwhile
		}
		if err != nil {
			return nil, fmt.Errorf("read domain %s: %w", d.Name, err)
		}
		var def libvirtxml.Domain
		if err := def.Unmarshal(x); err != nil {
			return nil, fmt.Errorf("parse domain %s: %w", d.Name, err)
		}
		if def.Metadata != nil {
			if m := MarkAttrs(def.Metadata.XML); m != nil {
				out[d.Name] = m
			}
		}
	}
	return out, nil
}

// markedNetworks lists the libvirt networks (active or not) that bear lab's
// mark: its NAT network and its bridge-named networks.
func markedNetworks(ctx context.Context, l *libvirt.Libvirt, lab string) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	nets, _, err := l.ConnectListAllNetworks(1, 0)
	if err != nil {
		return nil, fmt.Errorf("list libvirt networks: %w", err)
	}
	var out []string
	for _, n := range nets {
		def, err := networkDef(l, n, libvirt.NetworkXMLInactive)
		if isNetworkNotFound(err) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if networkOwner(def) == lab {
			out = append(out, n.Name)
		}
	}
	slices.Sort(out)
	return out, nil
}

// networkOwnerOf says whether a libvirt network exists and whose mark it
// bears ("" when none).
func networkOwnerOf(ctx context.Context, l *libvirt.Libvirt, name string) (found bool, owner string, err error) {
	st, err := getNetworkState(ctx, l, name)
	return st.Exists, st.Owner, err
}

// poolOwner says whether a storage pool exists and which lab's mark its
// directory holds ("" when none, or when its directory is gone).
func poolOwner(ctx context.Context, l *libvirt.Libvirt, name string) (found bool, owner string, err error) {
	st, err := getPoolState(ctx, l, name)
	return st.exists, st.owner(), err
}

// DanglingPool is a pool whose directory no longer exists.
type DanglingPool struct {
	Name string
	Dir  string
}

// markedPools lists the pools whose directory holds lab's mark, and the
// pools whose directory is gone (the mark went with it), which the caller
// must prove to be the lab's some other way (DeleteDanglingPool).
func markedPools(ctx context.Context, l *libvirt.Libvirt, lab string) (marked []string, dangling []DanglingPool, err error) {
	pools, _, err := l.ConnectListAllStoragePools(1, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("list storage pools: %w", err)
	}
	for _, p := range pools {
		st, err := getPoolState(ctx, l, p.Name)
		if err != nil {
			return nil, nil, err
		}
		if !st.exists {
			continue
		}
		if owner := st.owner(); owner != "" && owner == lab {
			marked = append(marked, p.Name)
			continue
		}
		if st.typ == "dir" && st.dir != "" {
			if _, err := os.Stat(st.dir); errors.Is(err, fs.ErrNotExist) {
				dangling = append(dangling, DanglingPool{Name: p.Name, Dir: st.dir})
			}
		}
	}
	slices.Sort(marked)
	return marked, dangling, nil
}

// deleteDanglingPool undefines a directory pool whose directory is gone.
// Nothing is lost with it: its volumes were files in that directory. It
// refuses a pool whose directory exists (that is DeletePool's, with the
// mark's proof).
func deleteDanglingPool(ctx context.Context, l *libvirt.Libvirt, name string) (deleted bool, err error) {
	st, err := getPoolState(ctx, l, name)
	if err != nil || !st.exists {
		return false, err
	}
	if _, err := os.Stat(st.dir); !errors.Is(err, fs.ErrNotExist) {
		return false, fmt.Errorf("storage pool %q: its directory %s exists; it is not dangling", name, st.dir)
	}
	if err := l.StoragePoolDestroy(st.pool); err != nil && !isLibvirtError(err, libvirt.ErrOperationInvalid) && !isLibvirtError(err, libvirt.ErrNoStoragePool) {
		return false, fmt.Errorf("stop storage pool %q: %w", name, err)
	}
	if err := l.StoragePoolUndefine(st.pool); err != nil && !isLibvirtError(err, libvirt.ErrNoStoragePool) {
		return false, fmt.Errorf("undefine storage pool %q: %w", name, err)
	}
	return true, nil
}

// RemotePool is a storage pool as libvirt alone shows it, for a pool on
// another host, whose directory (and the mark in it) this process cannot
// read: labctl on that host makes and removes it (EnsurePool, DeletePool).
type RemotePool struct {
	Found, Active bool
	Dir           string
	Volumes       []string // the files libvirt lists, the mark file left out
}

// remotePoolState reads a pool through libvirt only, refreshing it first
// when it is active so that its volumes are what is in the directory.
func remotePoolState(ctx context.Context, l *libvirt.Libvirt, name string) (RemotePool, error) {
	var rp RemotePool
	st, err := lookupPool(ctx, l, name)
	if err != nil || !st.exists {
		return rp, err
	}
	p := st.pool
	rp.Found, rp.Dir, rp.Active = true, st.dir, st.active
	if !rp.Active {
		return rp, nil
	}
	if err := l.StoragePoolRefresh(p, 0); err != nil {
		return rp, fmt.Errorf("refresh storage pool %q: %w", name, err)
	}
	vols, _, err := l.StoragePoolListAllVolumes(p, 1, 0)
	if err != nil {
		return rp, fmt.Errorf("list volumes of storage pool %q: %w", name, err)
	}
	for _, v := range vols {
		if v.Name != PoolMarkFile {
			rp.Volumes = append(rp.Volumes, v.Name)
		}
	}
	slices.Sort(rp.Volumes)
	return rp, nil
}
