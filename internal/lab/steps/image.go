package steps

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"

	"github.com/bmlab/bmlab/internal/lab"
	"github.com/bmlab/bmlab/internal/plan"
)

// EnsureImage makes an image (cluster.image) available at path, where the
// nodes' volumes or drives find it: a URL is downloaded once into the
// lab's image cache (a partial download is never used), its progress told
// under step; a path must exist where the provider's VMs can read it
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
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return false, err
	}
	e.Rep.Note(step, "downloading "+image)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, image, nil)
	if err != nil {
		return false, fmt.Errorf("cluster.image: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false, fmt.Errorf("download %s: %w", image, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return false, fmt.Errorf("download %s: %s", image, resp.Status)
	}
	part := path + ".part"
	f, err := os.OpenFile(part, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return false, err
	}
	body := newProgressReader(resp.Body, resp.ContentLength, func(msg string) { e.Rep.Progress(step, "downloading "+image+": "+msg) })
	if _, err := io.Copy(f, body); err != nil {
		f.Close()
		os.Remove(part)
		return false, fmt.Errorf("download %s: %w", image, err)
	}
	if err := f.Close(); err != nil {
		return false, err
	}
	return true, os.Rename(part, path)
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
