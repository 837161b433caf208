package lab

import (
	"context"
	"errors"
	"fmt"

	"github.com/bmlab/bmlab/internal/plan"
	"strings"
)

// storage ensures the lab's directory pool and one thin qcow2 volume per
// disk of every node.
type storage struct{}

func (storage) Name() string { return "storage" }

func (storage) Ensure(ctx context.Context, e *Env) (bool, error) {
	p := e.Plan
	c, err := e.Host.Ensure(ctx, Pool{Lab: p.Lab, Name: p.Storage.Pool, Dir: p.Storage.Dir})
	if err != nil {
		return false, err
	}
	changed := len(c) > 0
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
			c, err := e.Host.Ensure(ctx, Volume{Lab: p.Lab, Pool: p.Storage.Pool, Disk: d, Capacity: capacity})
			if err != nil {
				return changed, err
			}
			changed = changed || len(c) > 0
		}
	}
	return changed, nil
}

// Delete removes the lab's pools (their volumes with them) and the pools
// whose directory is gone when they are proven the lab's by name and
// layout (see the package doc).
func (storage) Delete(ctx context.Context, e *Env) error {
	p := e.Plan
	marked, err := e.Host.Marked(ctx, KindPool, p.Lab)
	if err != nil {
		return err
	}
	var errs []error
	for _, name := range union([]string{p.Storage.Pool}, marked) {
		if err := e.Host.Delete(ctx, KindPool, name, p.Lab); errors.Is(err, ErrForeign) {
			// A pool whose directory is gone is handled below.
			continue
		} else if err != nil {
			errs = append(errs, err)
		}
	}
	dangling, err := danglingPools(ctx, e)
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	for _, d := range dangling {
		switch {
		case d.Name == p.Storage.Pool && hasLayoutSuffix(d.Dir, ".bmlab/disks"):
			if err := e.Host.Delete(ctx, KindDanglingPool, d.Name, p.Lab); err != nil {
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
	if dangling, err = danglingPools(ctx, e); err != nil {
		return err
	}
	for _, d := range dangling {
		if d.Name == p.Storage.Pool {
			return fmt.Errorf("storage pool %s (directory %s gone) is still defined", d.Name, d.Dir)
		}
	}
	return remaining(ctx, e, KindPool)
}

func danglingPools(ctx context.Context, e *Env) ([]DanglingPool, error) {
	sv, err := e.Host.Survey(ctx, KindPool)
	if err != nil {
		return nil, err
	}
	return sv.Dangling, nil
}

// hasLayoutSuffix reports whether dir ends with the path elements suffix
// (…/.bmlab/disks, as labctl lays out a lab's pool): the proof that a pool
// whose directory is gone was the lab's.
func hasLayoutSuffix(dir, suffix string) bool {
	return strings.HasSuffix(strings.TrimRight(dir, "/"), "/"+suffix)
}
