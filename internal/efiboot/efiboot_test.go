package efiboot

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bmlab/bmlab/internal/testenv"
)

// pe makes the headers of a PE image: machine type, optional header magic
// and subsystem.
func pe(machine, magic, subsystem uint16) []byte {
	b := make([]byte, 512)
	copy(b, "MZ")
	binary.LittleEndian.PutUint32(b[0x3c:], 0x80)
	copy(b[0x80:], "PE\x00\x00")
	binary.LittleEndian.PutUint16(b[0x84:], machine)
	binary.LittleEndian.PutUint16(b[0x98:], magic)
	binary.LittleEndian.PutUint16(b[0x98+68:], subsystem)
	return b
}

func TestCheckApp(t *testing.T) {
	for _, tc := range []struct {
		name string
		file []byte
		arch string
		want string // "" accepted, else part of the error
	}{
		{"x86_64 application", pe(0x8664, 0x20b, 10), "x86_64", ""},
		{"aarch64 application", pe(0xaa64, 0x20b, 10), "aarch64", ""},
		{"aarch64 on x86_64", pe(0xaa64, 0x20b, 10), "x86_64", "a PE image for aarch64, and this machine is x86_64"},
		{"unknown machine", pe(0x1234, 0x20b, 10), "x86_64", "machine type 0x1234"},
		{"PE32", pe(0x8664, 0x10b, 10), "x86_64", "not PE32+"},
		{"driver", pe(0x8664, 0x20b, 11), "x86_64", "a UEFI driver"},
		{"windows program", pe(0x8664, 0x20b, 3), "x86_64", "subsystem 3"},
		{"html", []byte("<html><body>Not Found</body></html>"), "x86_64", "no MZ header"},
		{"dos program", append([]byte("MZ"), make([]byte, 200)...), "x86_64", "outside"},
		{"empty", nil, "x86_64", "no MZ header"},
		{"s390x", pe(0x8664, 0x20b, 10), "s390x", "not supported"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckApp(bytes.NewReader(tc.file), int64(len(tc.file)), tc.arch)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.want != "" && (err == nil || !errors.Is(err, ErrNotApp) || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("error %v, want ErrNotApp saying %q", err, tc.want)
			}
		})
	}
}

func TestLayoutIsFAT16(t *testing.T) {
	for _, size := range []int64{0, 1, 655360, 8 << 20, 100 << 20, MaxApp} {
		l, err := layout("BOOTX64.EFI", size)
		if err != nil {
			t.Fatalf("%d bytes: %v", size, err)
		}
		// The FAT specification's own computation of the cluster count.
		data := l.totalSectors - (1 + 2*l.fatSectors + rootSectors)
		n := data / l.secPerClus
		if n < 4085 || n > 65524 || n != l.clusters {
			t.Errorf("%d bytes: %d clusters (layout says %d), not a FAT16 volume", size, n, l.clusters)
		}
		if room := int64(n-2) * int64(l.secPerClus*sector); room < size {
			t.Errorf("%d bytes: room for %d only", size, room)
		}
		if l.fatSectors*sector < (n+2)*2 {
			t.Errorf("%d bytes: FAT of %d sectors for %d clusters", size, l.fatSectors, n)
		}
	}
}

// TestWriteISOReadByRealTools reads the image back with xorriso (the El
// Torito catalog) and mtools (the FAT volume and the file in it): what
// firmware reads, read by tools that know the formats.
func TestWriteISOReadByRealTools(t *testing.T) {
	testenv.Integration(t)
	for _, tool := range []string{"xorriso", "mcopy", "minfo"} {
		_, err := exec.LookPath(tool)
		testenv.Require(t, err == nil, tool+" (packages xorriso, mtools)")
	}
	dir := t.TempDir()
	app := append(pe(0x8664, 0x20b, 10), bytes.Repeat([]byte("bmlab efi "), 70000)...)
	var iso bytes.Buffer
	if err := WriteISO(&iso, bytes.NewReader(app), int64(len(app)), "x86_64"); err != nil {
		t.Fatal(err)
	}
	if want, _ := ISOSize(int64(len(app)), "x86_64"); int64(iso.Len()) != want {
		t.Errorf("ISO of %d bytes, ISOSize says %d", iso.Len(), want)
	}
	var again bytes.Buffer
	if err := WriteISO(&again, bytes.NewReader(app), int64(len(app)), "x86_64"); err != nil || !bytes.Equal(iso.Bytes(), again.Bytes()) {
		t.Errorf("two images of one application differ (err %v)", err)
	}
	isoPath := testenv.WriteFile(t, dir, "boot.iso", iso.Bytes())
	out, err := exec.Command("xorriso", "-indev", isoPath, "-report_el_torito", "plain", "-ls", "/").CombinedOutput()
	if err != nil {
		t.Fatalf("xorriso: %v\n%s", err, out)
	}
	for _, want := range []string{"El Torito boot img :   1  UEFI  y   none", "EFIBOOT.IMG"} {
		if !strings.Contains(strings.Join(strings.Fields(string(out)), " "), strings.Join(strings.Fields(want), " ")) {
			t.Errorf("xorriso does not show %q:\n%s", want, out)
		}
	}
	out, err = exec.Command("xorriso", "-osirrox", "on", "-indev", isoPath, "-extract", "/EFIBOOT.IMG", filepath.Join(dir, "fat.img")).CombinedOutput()
	if err != nil {
		t.Fatalf("xorriso extract: %v\n%s", err, out)
	}
	fat := filepath.Join(dir, "fat.img")
	if out, err := exec.Command("minfo", "-i", fat, "::").CombinedOutput(); err != nil || !strings.Contains(string(out), `disk type="FAT16   "`) {
		t.Errorf("minfo: %v\n%s", err, out)
	}
	got := filepath.Join(dir, "got.efi")
	if out, err := exec.Command("mcopy", "-n", "-i", fat, "::/EFI/BOOT/BOOTX64.EFI", got).CombinedOutput(); err != nil {
		t.Fatalf("mcopy: %v\n%s", err, out)
	}
	if b, _ := os.ReadFile(got); !bytes.Equal(b, app) {
		t.Errorf("\\EFI\\BOOT\\BOOTX64.EFI holds %d bytes, not the application's %d", len(b), len(app))
	}
}
