package media

import (
	"bytes"
	"encoding/binary"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/bmlab/bmlab/internal/efiboot"
	"github.com/bmlab/bmlab/internal/machine"
)

// fakeEFI returns n bytes with the headers of a PE32+ EFI application for
// the PE machine type.
func fakeEFI(n int, pemachine uint16) []byte {
	b := bytes.Repeat([]byte("efi!"), n/4)
	copy(b, "MZ")
	binary.LittleEndian.PutUint32(b[0x3c:], 0x80)
	copy(b[0x80:], "PE\x00\x00")
	binary.LittleEndian.PutUint16(b[0x84:], pemachine)
	binary.LittleEndian.PutUint16(b[0x98:], 0x20b)
	binary.LittleEndian.PutUint16(b[0x98+68:], 10)
	return b
}

// TestUefiApplicationIsWrapped: a request that takes a UEFI application
// (a UefiHttp boot's) gets it as the ISO that boots it, kept once and
// revalidated like any image; an ISO stays as it is; anything else, an
// application of another architecture included, is refused as no image,
// saying what it is.
func TestUefiApplicationIsWrapped(t *testing.T) {
	app := fakeEFI(300<<10, 0x8664)
	srv := newImageServer(t, false)
	srv.set(app, `"v1"`, time.Now().Add(-time.Hour))
	c := newCache(t, Config{})
	req := machine.ImageRequest{Image: srv.URL + "/ipxe.efi", ISO: true, EFIArch: "x86_64"}

	img := mustFetch(t, c, req)
	want, _ := efiboot.ISOSize(int64(len(app)), "x86_64")
	if img.Size != want {
		t.Errorf("fetched %d bytes, want the %d of the wrapping ISO", img.Size, want)
	}
	if err := checkISO(img.Path); err != nil {
		t.Errorf("the fetched file is no ISO: %v", err)
	}
	var iso bytes.Buffer
	if err := efiboot.WriteISO(&iso, bytes.NewReader(app), int64(len(app)), "x86_64"); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(img.Path); !bytes.Equal(b, iso.Bytes()) {
		t.Errorf("the fetched file is not efiboot's ISO of the application")
	}
	if again := mustFetch(t, c, req); again.Path != img.Path || srv.gets.Load() != 1 {
		t.Errorf("a second fetch: %s after %d downloads; want %s from the cache", again.Path, srv.gets.Load(), img.Path)
	}
	// A changed application is downloaded and wrapped again.
	app2 := fakeEFI(400<<10, 0x8664)
	srv.set(app2, `"v2"`, time.Now())
	if img2 := mustFetch(t, c, req); img2.Path == img.Path || srv.gets.Load() != 2 {
		t.Errorf("a changed application: %s after %d downloads", img2.Path, srv.gets.Load())
	}
	// The same URL asked for as a plain ISO (InsertMedia) is no ISO.
	if _, err := fetch(t, c, machine.ImageRequest{Image: req.Image, ISO: true}); kindOf(err) != machine.MediaNotImage {
		t.Errorf("the application as a CD image: %v, want %s", err, machine.MediaNotImage)
	}

	iso1 := newImageServer(t, false)
	iso1.set(fakeISO(64<<10, "iso"), "", time.Now().Add(-time.Hour))
	if got := mustFetch(t, c, machine.ImageRequest{Image: iso1.URL + "/boot.iso", ISO: true, EFIArch: "x86_64"}); got.Size != 64<<10 {
		t.Errorf("an ISO became %d bytes, want it as it is", got.Size)
	}

	for _, bad := range []struct {
		name, body, say string
	}{
		{"html", "<html><body>It works!</body></html>", "not an ISO 9660 image (no volume descriptor at byte 32769), and not a UEFI application: no PE/COFF image"},
		{"aarch64 application", string(fakeEFI(64<<10, 0xaa64)), "a PE image for aarch64, and this machine is x86_64"},
	} {
		s := newImageServer(t, false)
		s.set([]byte(bad.body), "", time.Now().Add(-time.Hour))
		_, err := fetch(t, c, machine.ImageRequest{Image: s.URL + "/boot.efi", ISO: true, EFIArch: "x86_64"})
		if kindOf(err) != machine.MediaNotImage || !strings.Contains(err.Error(), bad.say) {
			t.Errorf("%s: %v, want %s saying %q", bad.name, err, machine.MediaNotImage, bad.say)
		}
	}
	if st := c.Stats(); st.Images != 3 {
		t.Errorf("the cache holds %d images, want 3 (two wrapped applications, one ISO)", st.Images)
	}
}
