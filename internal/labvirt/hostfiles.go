package labvirt

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/bmlab/bmlab/internal/lab"
	"github.com/bmlab/bmlab/internal/netplumb"
)

// The lab's files on the machine labctl runs on, which the steps declare
// and this provider writes: NetworkManager's unmanaged-devices snippet,
// the host resolver's drop-in (netplumb writes both); and the disk images
// the nodes' volumes are cloned from, downloaded once and read with
// qemu-img.

// Image implements lab.Provider: qemu-img info of an image on this
// machine (-U: a running domain's backing file is read too).
func (r *Host) Image(ctx context.Context, path string) (lab.ImageInfo, error) {
	out, err := exec.CommandContext(ctx, "qemu-img", "info", "-U", "--output=json", path).Output()
	if err != nil {
		return lab.ImageInfo{}, fmt.Errorf("qemu-img info %s: %w", path, err)
	}
	var info struct {
		VirtualSize uint64 `json:"virtual-size"`
		Format      string `json:"format"`
	}
	if err := json.Unmarshal(out, &info); err != nil {
		return lab.ImageInfo{}, fmt.Errorf("qemu-img info %s: %w", path, err)
	}
	return lab.ImageInfo{Format: info.Format, VirtualSize: info.VirtualSize}, nil
}

// Image implements lab.Provider: the hub's, where the lab's images are.
func (m *MultiHost) Image(ctx context.Context, path string) (lab.ImageInfo, error) {
	return m.hub.Image(ctx, path)
}

// Fetch implements lab.Provider: an HTTP(S) GET into path+".part", renamed
// to path once whole; a failed download removes the part.
func (r *Host) Fetch(ctx context.Context, url, path string, watch func(io.Reader, int64) io.Reader) (bool, error) {
	if _, err := os.Stat(path); err == nil {
		return false, nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return false, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false, fmt.Errorf("download %s: %w", url, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false, fmt.Errorf("download %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return false, fmt.Errorf("download %s: %s", url, resp.Status)
	}
	part := path + ".part"
	f, err := os.OpenFile(part, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return false, err
	}
	if _, err := io.Copy(f, watch(resp.Body, resp.ContentLength)); err != nil {
		f.Close()
		os.Remove(part)
		return false, fmt.Errorf("download %s: %w", url, err)
	}
	if err := f.Close(); err != nil {
		return false, err
	}
	return true, os.Rename(part, path)
}

// Fetch implements lab.Provider: the hub's, where the lab's images are.
func (m *MultiHost) Fetch(ctx context.Context, url, path string, watch func(io.Reader, int64) io.Reader) (bool, error) {
	return m.hub.Fetch(ctx, url, path, watch)
}

// ensureFile writes a host file the lab declares; ok is false for another
// object.
func ensureFile(o lab.Object) (wrote []string, ok bool, err error) {
	var c bool
	var path string
	switch o := o.(type) {
	case lab.Unmanaged:
		c, err = o.Ensure()
		path = o.Path()
	case lab.ResolverDropIn:
		c, err = o.Write()
		path = o.Path
	default:
		return nil, false, nil
	}
	if c {
		wrote = []string{path}
	}
	return wrote, true, err
}

// fileDifferences says how a host file differs from its declaration; ok is
// false for another object.
func fileDifferences(o lab.Object) (out []lab.Difference, ok bool, err error) {
	switch o := o.(type) {
	case lab.Unmanaged:
		if o.Stale() {
			out = []lab.Difference{{Object: o.Path(), Got: "missing or changed"}}
		}
		return out, true, nil
	case lab.ResolverDropIn:
		problem, foreign, err := o.State()
		if problem != "" {
			out = []lab.Difference{{Object: o.Path, Got: problem, Blocking: foreign}}
		}
		return out, true, err
	}
	return nil, false, nil
}

// fileOwner is Owner of a host file's kind.
func fileOwner(kind lab.Kind, path string) (found bool, owner string, err error) {
	if kind == lab.KindUnmanaged {
		return netplumb.UnmanagedSnippetOwner(path)
	}
	return netplumb.ResolverDropInOwner(path)
}

// deleteFile is Delete of a host file's kind: absent is success, another
// lab's (or none's) is ErrForeign.
func deleteFile(kind lab.Kind, path, labName string) error {
	found, owner, err := fileOwner(kind, path)
	switch {
	case err != nil || !found:
		return err
	case owner != labName:
		return fmt.Errorf("%s %s: %w", kind, path, lab.ErrForeign)
	}
	if kind == lab.KindUnmanaged {
		_, _, err = netplumb.RemoveUnmanagedSnippet(filepath.Dir(path), labName)
		return err
	}
	_, _, err = netplumb.RemoveResolverDropIn(path, labName)
	return err
}
