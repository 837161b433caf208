package steps

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/bmlab/bmlab/internal/lab"
	"github.com/bmlab/bmlab/internal/plan"
)

// EnsureImage makes an image (cluster.image) available at path, where the
// nodes' volumes or drives find it: the provider downloads a URL once into
// the lab's image cache (lab.Provider.Fetch), its progress told under
// step; a path must exist where the provider's VMs can read it
// (lab.HostInfo.Unreachable).
func EnsureImage(ctx context.Context, e *lab.Env, step, image, path string) (bool, error) {
	if !plan.IsURL(image) {
		if _, err := os.Stat(path); err != nil {
			return false, fmt.Errorf("cluster.image: %w", err)
		}
		info, err := e.Host.Info(ctx, filepath.Dir(path))
		if err != nil {
			return false, fmt.Errorf("the lab's host: %w", err)
		}
		return false, info.Unreachable
	}
	if lab.Exists(path) {
		return false, nil
	}
	e.Rep.Note(step, "downloading "+image)
	return e.Host.Fetch(ctx, image, path, func(body io.Reader, size int64) io.Reader {
		return newProgressReader(body, size, func(msg string) { e.Rep.Progress(step, "downloading "+image+": "+msg) })
	})
}

// virtualSize is a disk image's virtual size, as the provider reads it;
// the image must be qcow2.
func virtualSize(ctx context.Context, e *lab.Env, path string) (uint64, error) {
	info, err := e.Host.Image(ctx, path)
	if err != nil {
		return 0, err
	}
	if info.Format != "qcow2" {
		return 0, fmt.Errorf("cluster.image %s is %s, not qcow2 (RHCOS's qemu image is qcow2; convert with qemu-img convert -O qcow2)", path, info.Format)
	}
	return info.VirtualSize, nil
}
