package ociimage

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/v1/validate"
)

// fakeBinary writes a file that passes as a static ELF binary.
func fakeBinary(t *testing.T, content string) string {
	p := filepath.Join(t.TempDir(), "vbmcd")
	if err := os.WriteFile(p, []byte("\x7fELF"+content), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// The same inputs give the same image digest and the same archive bytes;
// another binary gives another digest. The image is valid as
// go-containerregistry checks images (digests, sizes, diff IDs).
func TestReproducible(t *testing.T) {
	at := time.Unix(1_700_000_000, 0)
	bin := fakeBinary(t, "static")
	var digests, archives []string
	for range 2 {
		img, err := Image(Spec{Binary: bin, Arch: "amd64", Created: at, Version: "v1"})
		if err != nil {
			t.Fatal(err)
		}
		if err := validate.Image(img); err != nil {
			t.Fatal(err)
		}
		d, _ := img.Digest()
		digests = append(digests, d.String())
		out := t.TempDir()
		archive, err := Write(img, out, "bmlab/vbmcd:test", at)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := os.ReadFile(archive)
		sum := sha256.Sum256(b)
		archives = append(archives, string(sum[:]))
	}
	if digests[0] != digests[1] || archives[0] != archives[1] {
		t.Errorf("two builds differ: digests %v, archives equal %v", digests, archives[0] == archives[1])
	}
	img, err := Image(Spec{Binary: fakeBinary(t, "other"), Arch: "amd64", Created: at, Version: "v1"})
	if err != nil {
		t.Fatal(err)
	}
	if d, _ := img.Digest(); d.String() == digests[0] {
		t.Errorf("another binary, the same digest %s", d)
	}
}

// The image runs vbmcd as a user of its own, has no shell or other
// program and no file of the build host's (no CA bundle: vbmcd carries
// its roots), and its layer's entries are sorted, timed alike and owned
// as vbmcd needs (its state and media directories its user's).
func TestContents(t *testing.T) {
	at := time.Unix(1_700_000_000, 0)
	img, err := Image(Spec{Binary: fakeBinary(t, "x"), Arch: "arm64", Created: at, Version: "v2"})
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.Config.User != "65532:65532" || cf.Architecture != "arm64" || cf.OS != "linux" || !cf.Created.Equal(at) ||
		cmp.Diff([]string{Entrypoint}, cf.Config.Entrypoint) != "" || cmp.Diff([]string{"sushy-emulator"}, cf.Config.Cmd) != "" || cf.Config.Labels["org.opencontainers.image.version"] != "v2" {
		t.Errorf("config: %+v", cf)
	}
	layers, _ := img.Layers()
	if len(layers) != 1 {
		t.Fatalf("%d layers", len(layers))
	}
	rc, _ := layers[0].Uncompressed()
	defer rc.Close()
	tr := tar.NewReader(rc)
	type file struct {
		mode int64
		uid  int
	}
	got := map[string]file{}
	var names []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if !h.ModTime.Equal(at) {
			t.Errorf("%s: time %v", h.Name, h.ModTime)
		}
		names = append(names, h.Name)
		got[h.Name] = file{h.Mode, h.Uid}
		if h.Name == "etc/passwd" {
			b, _ := io.ReadAll(tr)
			if !strings.Contains(string(b), "vbmcd:x:65532:65532:") {
				t.Errorf("passwd: %s", b)
			}
		}
	}
	want := []string{"etc/", "etc/group", "etc/nsswitch.conf", "etc/passwd",
		"tmp/", "usr/", "usr/local/", "usr/local/bin/", "usr/local/bin/vbmcd", "var/", "var/lib/", "var/lib/bmlab/", "var/lib/bmlab/media/", "var/lib/vbmcd/"}
	if diff := cmp.Diff(want, names); diff != "" {
		t.Errorf("entries, in order (-want +got):\n%s", diff)
	}
	for name, f := range map[string]file{"usr/local/bin/vbmcd": {0o755, 0}, "var/lib/vbmcd/": {0o700, UID}, "var/lib/bmlab/media/": {0o755, UID}, "tmp/": {0o1777, 0}} {
		if got[name] != f {
			t.Errorf("%s: %+v, want %+v", name, got[name], f)
		}
	}
}

// A binary that needs a C library, or is no binary, is refused.
func TestRefusesWhatCannotRun(t *testing.T) {
	dyn := fakeBinary(t, "...\x00/lib64/ld-linux-x86-64.so.2\x00...")
	if _, err := Image(Spec{Binary: dyn, Created: time.Unix(0, 0)}); err == nil || !strings.Contains(err.Error(), "CGO_ENABLED=0") {
		t.Errorf("a dynamic binary: %v", err)
	}
	script := filepath.Join(t.TempDir(), "vbmcd")
	os.WriteFile(script, []byte("#!/bin/sh\n"), 0o755)
	if _, err := Image(Spec{Binary: script, Created: time.Unix(0, 0)}); err == nil {
		t.Error("a script was taken for vbmcd")
	}
	// The gzip stream carries no name and no time.
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Close()
	gz, err := layer(nil, time.Unix(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil || zr.Name != "" || !zr.ModTime.IsZero() {
		t.Errorf("gzip header: %v %q %v", err, zr.Name, zr.ModTime)
	}
}
