package up

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/bmlab/bmlab/internal/lab"
	"github.com/bmlab/bmlab/internal/labconfig"
	"github.com/bmlab/bmlab/internal/virt"
)

// storageStep ensures a directory pool in the lab's directory and one thin
// qcow2 volume per node (plus its extra disks).
func storageStep(l *lab.Lab, cfg *labconfig.Config) lab.Step {
	pool := cfg.Name + "-disks"
	dir := filepath.Join(lab.StateDir(l.Spec.Dir), "disks")
	paths := map[string][]string{}
	l.VolumePaths = func(n lab.NodeSpec) []string { return paths[n.Name] }
	// volumes are the node's disks: the boot disk, then the extra ones.
	volumes := func(n lab.NodeSpec) []virt.VolumeSpec {
		out := []virt.VolumeSpec{{Pool: pool, Name: n.Name + ".qcow2", CapacityBytes: uint64(n.DiskGiB) << 30, Format: "qcow2", Lab: cfg.Name}}
		for i, gib := range n.ExtraDiskGiB {
			out = append(out, virt.VolumeSpec{Pool: pool, Name: fmt.Sprintf("%s-extra%d.qcow2", n.Name, i+1), CapacityBytes: uint64(gib) << 30, Format: "qcow2", Lab: cfg.Name})
		}
		return out
	}
	return lab.Step{
		Name: "storage",
		Ensure: func(ctx context.Context) (bool, error) {
			lc, err := l.Be.Conn().Client()
			if err != nil {
				return false, err
			}
			changed, err := virt.EnsurePool(ctx, lc, virt.PoolSpec{Name: pool, Dir: dir, Lab: cfg.Name})
			if err != nil {
				return false, err
			}
			for _, n := range l.Spec.Nodes {
				paths[n.Name] = nil
				for _, v := range volumes(n) {
					p, c, err := virt.EnsureVolume(ctx, lc, v)
					if err != nil {
						return changed, err
					}
					paths[n.Name] = append(paths[n.Name], p)
					changed = changed || c
				}
			}
			return changed, nil
		},
		Delete: func(ctx context.Context) error {
			lc, err := l.Be.Conn().Client()
			if err != nil {
				return err
			}
			for _, n := range l.Spec.Nodes {
				for _, v := range volumes(n) {
					if _, err := virt.DeleteVolume(ctx, lc, pool, v.Name, cfg.Name); err != nil {
						return err
					}
				}
			}
			_, err = virt.DeletePool(ctx, lc, pool, cfg.Name)
			return err
		},
	}
}
