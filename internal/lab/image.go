package lab

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/bmlab/bmlab/internal/plan"
)

// ensureImage makes the hybrid nodes' image available where their clones
// find it: a URL is downloaded once into the lab's image cache (a partial
// download is never used); a path must exist and be reachable by qemu.
func ensureImage(ctx context.Context, e *Env) (bool, error) {
	h := e.Plan.Hybrid
	if !plan.IsURL(h.Image) {
		if _, err := os.Stat(h.Backing); err != nil {
			return false, fmt.Errorf("cluster.image: %w", err)
		}
		return false, QemuCanReach(filepath.Dir(h.Backing))
	}
	if exists(h.Backing) {
		return false, nil
	}
	if err := os.MkdirAll(filepath.Dir(h.Backing), 0o755); err != nil {
		return false, err
	}
	e.Rep.Note("storage", "downloading "+h.Image)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, h.Image, nil)
	if err != nil {
		return false, fmt.Errorf("cluster.image: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false, fmt.Errorf("download %s: %w", h.Image, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return false, fmt.Errorf("download %s: %s", h.Image, resp.Status)
	}
	part := h.Backing + ".part"
	f, err := os.OpenFile(part, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return false, err
	}
	body := newProgressReader(resp.Body, resp.ContentLength, func(msg string) { e.Rep.Progress("storage", "downloading "+h.Image+": "+msg) })
	if _, err := io.Copy(f, body); err != nil {
		f.Close()
		os.Remove(part)
		return false, fmt.Errorf("download %s: %w", h.Image, err)
	}
	if err := f.Close(); err != nil {
		return false, err
	}
	return true, os.Rename(part, h.Backing)
}

// virtualSize is a disk image's virtual size (qemu-img info).
func virtualSize(ctx context.Context, path string) (uint64, error) {
	out, err := exec.CommandContext(ctx, "qemu-img", "info", "-U", "--output=json", path).Output()
	if err != nil {
		return 0, fmt.Errorf("qemu-img info %s: %w", path, err)
	}
	var info struct {
		VirtualSize uint64 `json:"virtual-size"`
		Format      string `json:"format"`
	}
	if err := json.Unmarshal(out, &info); err != nil {
		return 0, fmt.Errorf("qemu-img info %s: %w", path, err)
	}
	if info.Format != "qcow2" {
		return 0, fmt.Errorf("cluster.image %s is %s, not qcow2 (RHCOS's qemu image is qcow2; convert with qemu-img convert -O qcow2)", path, info.Format)
	}
	return info.VirtualSize, nil
}
