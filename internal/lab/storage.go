package lab

import (
	"context"
	"errors"
	"fmt"

	"github.com/bmlab/bmlab/internal/labvirt"
	"github.com/bmlab/bmlab/internal/plan"
)

// storage ensures the lab's directory pool and one thin qcow2 volume per
// disk of every node.
type storage struct{}

func (storage) Name() string { return "storage" }

func (storage) Ensure(ctx context.Context, e *Env) (bool, error) {
	p := e.Plan
	changed, err := e.Host.Storage().EnsurePool(ctx, labvirt.PoolSpec{Name: p.Storage.Pool, Dir: p.Storage.Dir, Lab: p.Lab})
	if err != nil {
		return false, err
	}
	var imageBytes uint64
	if p.Hybrid != nil {
		c, err := ensureImage(ctx, e)
		if err != nil {
			return changed, err
		}
		changed = changed || c
		// A single node's image is the live ISO; its disk is blank.
		if !p.Hybrid.SingleNode {
			if imageBytes, err = virtualSize(ctx, p.Hybrid.Backing); err != nil {
				return changed, err
			}
		}
	}
	for _, n := range p.Nodes {
		if n.Role == plan.RoleBootstrap && exists(p.Paths.BootstrapRemoved) {
			continue
		}
		for _, d := range n.Disks {
			capacity := uint64(d.SizeGiB) << 30
			if d.Backing != "" && imageBytes > capacity {
				// A clone is at least as large as its image.
				capacity = imageBytes
			}
			c, err := e.Host.Storage().EnsureVolume(ctx, labvirt.VolumeSpec{
				Pool: p.Storage.Pool, Name: d.Volume, CapacityBytes: capacity,
				Format: "qcow2", Lab: p.Lab, Backing: d.Backing,
			})
			if err != nil {
				return changed, err
			}
			changed = changed || c
		}
	}
	return changed, nil
}

// Delete removes the lab's pools (their volumes with them) and the pools
// whose directory is gone when they are proven the lab's by name and
// layout (see the package doc).
func (storage) Delete(ctx context.Context, e *Env) error {
	p := e.Plan
	marked, err := e.Host.Objects().Marked(ctx, KindPool, p.Lab)
	if err != nil {
		return err
	}
	var errs []error
	for _, name := range union([]string{p.Storage.Pool}, marked) {
		if err := e.Host.Objects().Delete(ctx, KindPool, name, p.Lab); errors.Is(err, ErrForeign) {
			// A pool whose directory is gone is handled below.
			continue
		} else if err != nil {
			errs = append(errs, err)
		}
	}
	dangling, err := e.Host.Storage().DanglingPools(ctx)
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	for _, d := range dangling {
		switch {
		case d.Name == p.Storage.Pool && labvirt.HasLayoutSuffix(d.Dir, ".bmlab/disks"):
			if err := e.Host.Storage().DeleteDanglingPool(ctx, d.Name); err != nil {
				errs = append(errs, err)
			} else {
				e.Rep.Note("remove storage", fmt.Sprintf("removed pool %s: its directory %s was gone (nothing lost with it)", d.Name, d.Dir))
			}
		case d.Name == p.Storage.Pool:
			errs = append(errs, fmt.Errorf("storage pool %s has the lab's pool name but its directory %s is gone and was not laid out by labctl (…/.bmlab/disks): not proven the lab's, left alone; if it is, remove it: virsh pool-undefine %s", d.Name, d.Dir, d.Name))
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	// A dangling pool of the plan's name is the lab's too: it must be gone.
	if dangling, err = e.Host.Storage().DanglingPools(ctx); err != nil {
		return err
	}
	for _, d := range dangling {
		if d.Name == p.Storage.Pool {
			return fmt.Errorf("storage pool %s (directory %s gone) is still defined", d.Name, d.Dir)
		}
	}
	return remaining(ctx, e, KindPool)
}
