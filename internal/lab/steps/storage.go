package steps

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/bmlab/bmlab/internal/lab"
	"github.com/bmlab/bmlab/internal/plan"
)

// Storage ensures the lab's directory pool and one thin qcow2 volume per
// disk of every node; a volume that clones an image is at least as large
// as the image. A mode's hooks make the image first and leave nodes out.
type Storage struct {
	// Image makes what the volumes clone available (nil: nothing).
	Image func(ctx context.Context, e *lab.Env) (bool, error)
	// Skip leaves a node's disks out (nil: none).
	Skip func(p *plan.Plan, n plan.Node) bool
}

func (Storage) Name() string { return "storage" }

func (s Storage) Ensure(ctx context.Context, e *lab.Env) (bool, error) {
	p := e.Plan
	c, err := e.Host.Ensure(ctx, lab.Pool{Lab: p.Lab, Name: p.Storage.Pool, Dir: p.Storage.Dir})
	if err != nil {
		return false, err
	}
	changed := len(c) > 0
	if s.Image != nil {
		c, err := s.Image(ctx, e)
		if err != nil {
			return changed, err
		}
		changed = changed || c
	}
	imageBytes := map[string]uint64{}
	for _, n := range p.Nodes {
		if s.Skip != nil && s.Skip(p, n) {
			continue
		}
		for _, d := range n.Disks {
			capacity := uint64(d.SizeGiB) << 30
			if d.Backing != "" {
				size, ok := imageBytes[d.Backing]
				if !ok {
					if size, err = virtualSize(ctx, e, d.Backing); err != nil {
						return changed, err
					}
					imageBytes[d.Backing] = size
				}
				// A clone is at least as large as its image.
				capacity = max(capacity, size)
			}
			c, err := e.Host.Ensure(ctx, lab.Volume{Lab: p.Lab, Pool: p.Storage.Pool, Disk: d, Capacity: capacity})
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
func (Storage) Delete(ctx context.Context, e *lab.Env) error {
	p := e.Plan
	marked, err := e.Host.Marked(ctx, lab.KindPool, p.Lab)
	if err != nil {
		return err
	}
	var errs []error
	for _, name := range lab.Union([]string{p.Storage.Pool}, marked) {
		if err := e.Host.Delete(ctx, lab.KindPool, name, p.Lab); errors.Is(err, lab.ErrForeign) {
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
			if err := e.Host.Delete(ctx, lab.KindDanglingPool, d.Name, p.Lab); err != nil {
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
	return lab.Remaining(ctx, e, lab.KindPool)
}

func danglingPools(ctx context.Context, e *lab.Env) ([]lab.DanglingPool, error) {
	sv, err := e.Host.Survey(ctx, lab.KindPool)
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
