// Command mkimage writes vbmcd's OCI image (internal/ociimage) from a
// static vbmcd binary; hack/image.sh (make image) builds the binary and
// runs it. It prints the image's digest.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/bmlab/bmlab/internal/ociimage"
)

func main() {
	var s ociimage.Spec
	var out, ref string
	var created int64
	flag.StringVar(&s.Binary, "binary", "", "the static vbmcd binary")
	flag.StringVar(&s.Arch, "arch", "amd64", "its GOARCH")
	flag.StringVar(&s.Version, "version", "dev", "the image's version label")
	flag.Int64Var(&created, "created", 0, "every timestamp in the image, in Unix seconds (SOURCE_DATE_EPOCH)")
	flag.StringVar(&out, "out", "_out/image", "where the OCI layout (oci/) and archive (vbmcd-oci.tar) go")
	flag.StringVar(&ref, "ref", "bmlab/vbmcd:dev", "the image's name in the layout and archive")
	flag.Parse()
	if err := run(s, out, ref, time.Unix(created, 0)); err != nil {
		fmt.Fprintln(os.Stderr, "mkimage:", err)
		os.Exit(1)
	}
}

func run(s ociimage.Spec, out, ref string, created time.Time) error {
	s.Created = created
	img, err := ociimage.Image(s)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	archive, err := ociimage.Write(img, out, ref, created)
	if err != nil {
		return err
	}
	d, err := img.Digest()
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(out, "digest"), []byte(d.String()+"\n"), 0o644); err != nil {
		return err
	}
	fmt.Printf("%s %s %s\n", ref, d, archive)
	return nil
}
