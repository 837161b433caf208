package labvirt

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"

	"github.com/bmlab/bmlab/internal/lab"
	"github.com/bmlab/bmlab/internal/netplumb"
)

// The lab's files on the machine labctl runs on, which the steps declare
// and this provider writes: NetworkManager's unmanaged-devices snippet,
// the host resolver's drop-in (netplumb writes both); and the disk images
// the nodes' volumes are cloned from, read with qemu-img.

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
