// Package ociimage builds vbmcd's OCI image without a container daemon
// (go-containerregistry's image model; `make image`, hack/image.sh): one
// layer holding the static vbmcd binary, a passwd and group file with the
// non-root user it runs as, the directories it writes (its state and the
// media cache, owned by that user) and, when the build host has one, the
// CA bundle that verifies HTTPS image servers. There is no shell and no
// other program. The build is reproducible: every entry has the same
// timestamp (the given time, by default the commit's), entries are
// sorted, owners and modes are fixed, and gzip writes no name or time, so
// the same binary gives the same image digest and the same archive bytes.
//
// What it does not do: build the binary (hack/image.sh does, with
// CGO_ENABLED=0), push to a registry, or run the image.
package ociimage

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The user vbmcd runs as in the image, as distroless images name it.
const (
	UID  = 65532
	User = "vbmcd"
)

// Cmd is the image's default command: vbmcd sushy-emulator, which with no
// arguments starts as Metal3's sushy-tools image does (its configuration
// at /root/sushy/conf.py), so that the image runs in place of that one
// unchanged. Any arguments replace it: vbmcd's own flags, or
// sushy-emulator and its flags.
var Cmd = []string{"sushy-emulator"}

// Paths in the image.
const (
	Entrypoint = "/usr/local/bin/vbmcd"
	StateDir   = "/var/lib/vbmcd"       // vbmcd's --state-dir default
	MediaDir   = "/var/lib/bmlab/media" // its --media-dir default
)

// Spec is what goes into the image.
type Spec struct {
	Binary  string    // the static vbmcd (CGO_ENABLED=0)
	Arch    string    // its GOARCH: amd64, arm64
	Created time.Time // every timestamp in the image
	Version string    // the org.opencontainers.image.version label
}

// entry is one file or directory of the layer.
type entry struct {
	name string // without a leading slash; directories end in /
	mode int64
	uid  int
	data []byte
}

// Image builds the image.
func Image(s Spec) (v1.Image, error) {
	bin, err := os.ReadFile(s.Binary)
	if err != nil {
		return nil, fmt.Errorf("vbmcd binary: %w", err)
	}
	if !bytes.HasPrefix(bin, []byte("\x7fELF")) {
		return nil, fmt.Errorf("%s is not an ELF binary", s.Binary)
	}
	if bytes.Contains(bin, []byte("/lib64/ld-linux")) || bytes.Contains(bin, []byte("/lib/ld-linux")) {
		return nil, fmt.Errorf("%s is dynamically linked: build it with CGO_ENABLED=0 (the image has no C library)", s.Binary)
	}
	entries := []entry{
		{name: "etc/passwd", mode: 0o644, data: fmt.Appendf(nil, "root:x:0:0:root:/root:/sbin/nologin\n%s:x:%d:%d:%s:%s:/sbin/nologin\n", User, UID, UID, User, StateDir)},
		{name: "etc/group", mode: 0o644, data: fmt.Appendf(nil, "root:x:0:\n%s:x:%d:\n", User, UID)},
		{name: "etc/nsswitch.conf", mode: 0o644, data: []byte("hosts: files dns\n")},
		{name: strings.TrimPrefix(Entrypoint, "/"), mode: 0o755, data: bin},
		{name: strings.TrimPrefix(StateDir, "/") + "/", mode: 0o700, uid: UID},
		{name: strings.TrimPrefix(MediaDir, "/") + "/", mode: 0o755, uid: UID},
		{name: "tmp/", mode: 0o1777},
	}
	gz, err := layer(entries, s.Created)
	if err != nil {
		return nil, err
	}
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(gz)), nil },
		tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	created := v1.Time{Time: s.Created.UTC()}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.ConfigFile(img, &v1.ConfigFile{
		Architecture: s.Arch,
		OS:           "linux",
		Created:      created,
		Config: v1.Config{
			User:         fmt.Sprintf("%d:%d", UID, UID),
			Entrypoint:   []string{Entrypoint},
			Cmd:          Cmd,
			WorkingDir:   StateDir,
			ExposedPorts: map[string]struct{}{"8000/tcp": {}},
			Labels: map[string]string{
				"org.opencontainers.image.title":       "vbmcd",
				"org.opencontainers.image.description": "Redfish and IPMI BMCs for libvirt VMs, KubeVirt VirtualMachines and simulated servers (bmlab)",
				"org.opencontainers.image.version":     s.Version,
			},
		},
		RootFS: v1.RootFS{Type: "layers"},
	})
	if err != nil {
		return nil, err
	}
	return mutate.Append(img, mutate.Addendum{Layer: plainLayer{l}, MediaType: types.OCILayer,
		History: v1.History{Created: created, CreatedBy: "make image (internal/ociimage)", Comment: "vbmcd " + s.Version}})
}

// plainLayer is a layer whose descriptor carries no empty annotations
// (tarball's carries an empty map, which a manifest read back has not, so
// go-containerregistry's own validator would find them different).
type plainLayer struct{ v1.Layer }

func (l plainLayer) Descriptor() (*v1.Descriptor, error) {
	d, err := l.Layer.(interface {
		Descriptor() (*v1.Descriptor, error)
	}).Descriptor()
	if err != nil {
		return nil, err
	}
	c := *d
	if len(c.Annotations) == 0 {
		c.Annotations = nil
	}
	return &c, nil
}

// layer writes the entries, and every directory above them, as a gzipped
// tar with sorted names, one timestamp and fixed owners.
func layer(entries []entry, at time.Time) ([]byte, error) {
	dirs := map[string]bool{}
	for _, e := range entries {
		for d := path.Dir(strings.TrimSuffix(e.name, "/")); d != "."; d = path.Dir(d) {
			dirs[d+"/"] = true
		}
	}
	for _, e := range entries {
		delete(dirs, e.name)
	}
	for d := range dirs {
		entries = append(entries, entry{name: d, mode: 0o755})
	}
	slices.SortFunc(entries, func(a, b entry) int { return strings.Compare(a.name, b.name) })
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	tw := tar.NewWriter(zw)
	at = at.UTC().Truncate(time.Second)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Mode: e.mode, Uid: e.uid, Gid: e.uid, ModTime: at, Format: tar.FormatPAX,
			Uname: map[bool]string{true: User, false: "root"}[e.uid == UID], Gname: map[bool]string{true: User, false: "root"}[e.uid == UID]}
		if strings.HasSuffix(e.name, "/") {
			h.Typeflag = tar.TypeDir
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(e.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Write puts img into dir as an OCI image layout (oci/, with ref as its
// org.opencontainers.image.ref.name) and as an OCI archive of that layout
// (vbmcd-oci.tar, which podman load and skopeo take), and returns the
// archive's path. The archive's entries are sorted and timed at, so its
// bytes too are the same for the same image.
func Write(img v1.Image, dir, ref string, at time.Time) (string, error) {
	lay := filepath.Join(dir, "oci")
	if err := os.RemoveAll(lay); err != nil {
		return "", err
	}
	p, err := layout.Write(lay, empty.Index)
	if err != nil {
		return "", err
	}
	if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": ref})); err != nil {
		return "", err
	}
	archive := filepath.Join(dir, "vbmcd-oci.tar")
	f, err := os.Create(archive + ".tmp")
	if err != nil {
		return "", err
	}
	defer os.Remove(archive + ".tmp")
	tw := tar.NewWriter(f)
	var names []string
	if err := filepath.WalkDir(lay, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == lay {
			return err
		}
		rel, _ := filepath.Rel(lay, p)
		if d.IsDir() {
			rel += "/"
		}
		names = append(names, filepath.ToSlash(rel))
		return nil
	}); err != nil {
		f.Close()
		return "", err
	}
	slices.Sort(names)
	at = at.UTC().Truncate(time.Second)
	for _, n := range names {
		h := &tar.Header{Name: n, ModTime: at, Mode: 0o644, Typeflag: tar.TypeReg, Format: tar.FormatPAX}
		var data []byte
		if strings.HasSuffix(n, "/") {
			h.Mode, h.Typeflag = 0o755, tar.TypeDir
		} else {
			if data, err = os.ReadFile(filepath.Join(lay, n)); err != nil {
				f.Close()
				return "", err
			}
			h.Size = int64(len(data))
		}
		if err := tw.WriteHeader(h); err != nil {
			f.Close()
			return "", err
		}
		if _, err := tw.Write(data); err != nil {
			f.Close()
			return "", err
		}
	}
	if err := tw.Close(); err != nil {
		f.Close()
		return "", err
	}
	if err := f.Close(); err != nil {
		return "", err
	}
	return archive, os.Rename(archive+".tmp", archive)
}
