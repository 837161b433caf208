package ironictest

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"
	"unicode/utf16"

	"github.com/google/go-cmp/cmp"

	"github.com/bmlab/bmlab/internal/testenv"
)

// gptDisk is a raw disk of size bytes with a protective MBR and a GPT
// (primary and backup headers) holding parts, each filled with fill.
type testPart struct {
	typ, id     [16]byte
	first, last uint64
	name        string
	fill        byte
}

func gptDisk(size int64, parts ...testPart) []byte {
	b := make([]byte, size)
	b[510], b[511] = 0x55, 0xaa
	hdr := func(at int64) {
		copy(b[at:], "EFI PART")
		binary.LittleEndian.PutUint64(b[at+72:], 2)
		binary.LittleEndian.PutUint32(b[at+80:], 128)
		binary.LittleEndian.PutUint32(b[at+84:], 128)
	}
	hdr(sector)
	hdr(size - sector)
	for i, p := range parts {
		e := b[2*sector+i*128:]
		copy(e[0:], p.typ[:])
		copy(e[16:], p.id[:])
		binary.LittleEndian.PutUint64(e[32:], p.first)
		binary.LittleEndian.PutUint64(e[40:], p.last)
		for j, c := range utf16.Encode([]rune(p.name)) {
			binary.LittleEndian.PutUint16(e[56+2*j:], c)
		}
		copy(b[p.first*sector:(p.last+1)*sector], bytes.Repeat([]byte{p.fill}, int(p.last-p.first+1)*sector))
	}
	return b
}

var (
	// The EFI system partition's type GUID as stored (UEFI 2.10 §5.3.3).
	espGUID   = [16]byte{0x28, 0x73, 0x2a, 0xc1, 0x1f, 0xf8, 0xd2, 0x11, 0xba, 0x4b, 0x00, 0xa0, 0xc9, 0x3e, 0xc9, 0x3b}
	linuxFS   = [16]byte{0xaf, 0x3d, 0xc6, 0x0f, 0x83, 0x84, 0x72, 0x47, 0x8e, 0x79, 0x3d, 0x69, 0xd8, 0x47, 0x7d, 0xe4}
	testPart1 = testPart{typ: espGUID, id: [16]byte{1}, first: 64, last: 127, name: "EFI System", fill: 0xe5}
	testPart2 = testPart{typ: linuxFS, id: [16]byte{2}, first: 128, last: 191, name: "bmlab-root", fill: 0x42}
)

// TestReadLabel: a GPT disk's partitions as the UEFI specification lays
// them out; an MBR alone; a zeroed disk has no table.
func TestReadLabel(t *testing.T) {
	disk := gptDisk(256*sector, testPart1, testPart2)
	l, err := ReadLabel(bytes.NewReader(disk), int64(len(disk)))
	if err != nil {
		t.Fatal(err)
	}
	want := Label{MBR: true, GPT: true, BackupGPT: true, Partitions: []Partition{
		{Type: "C12A7328-F81F-11D2-BA4B-00A0C93EC93B", GUID: "00000001-0000-0000-0000-000000000000", First: 64, Last: 127, Name: "EFI System", TypeIsESP: true, Index: 1},
		{Type: "0FC63DAF-8483-4772-8E79-3D69D8477DE4", GUID: "00000002-0000-0000-0000-000000000000", First: 128, Last: 191, Name: "bmlab-root", Index: 2},
	}}
	if d := cmp.Diff(want, l); d != "" {
		t.Errorf("ReadLabel (-want +got):\n%s", d)
	}
	if l.Empty() {
		t.Error("a GPT disk reads as empty")
	}

	mbr := make([]byte, 64*sector)
	mbr[510], mbr[511] = 0x55, 0xaa
	if l, err := ReadLabel(bytes.NewReader(mbr), int64(len(mbr))); err != nil || l.Empty() || l.GPT {
		t.Errorf("an MBR-only disk: %s, %v; want an MBR and no GPT", l, err)
	}
	zero := make([]byte, 64*sector)
	if l, err := ReadLabel(bytes.NewReader(zero), int64(len(zero))); err != nil || !l.Empty() {
		t.Errorf("a zeroed disk: %s, %v; want no partition table", l, err)
	}
	// Cleaning that wiped the primary GPT but left the backup is not done.
	half := gptDisk(256*sector, testPart1)
	copy(half[:34*sector], make([]byte, 34*sector))
	if l, _ := ReadLabel(bytes.NewReader(half), int64(len(half))); l.Empty() || !l.BackupGPT {
		t.Errorf("a disk with its backup GPT left: %s; want it seen", l)
	}
}

// TestSameImageAndErased: the checks of a deployed and a cleaned disk. A
// disk holding the image (bigger, its backup GPT at its own end) is the
// image; one with a changed byte in a partition, a missing partition or no
// table is not; Erased refuses a disk with a table and accepts a zeroed
// one.
func TestSameImageAndErased(t *testing.T) {
	dir := t.TempDir()
	image := testenv.WriteFile(t, dir, "image", gptDisk(256*sector, testPart1, testPart2))
	deployed := testenv.WriteFile(t, dir, "deployed", gptDisk(1024*sector, testPart1, testPart2))
	if err := SameImage(deployed, image); err != nil {
		t.Errorf("a disk holding the image: %v", err)
	}
	changed := gptDisk(1024*sector, testPart1, testPart2)
	changed[150*sector] ^= 1
	for name, disk := range map[string][]byte{
		"a byte changed":       changed,
		"a partition missing":  gptDisk(1024*sector, testPart1),
		"no partition table":   make([]byte, 1024*sector),
		"another partition id": gptDisk(1024*sector, testPart1, testPart{typ: linuxFS, id: [16]byte{3}, first: 128, last: 191, name: "bmlab-root", fill: 0x42}),
	} {
		if err := SameImage(testenv.WriteFile(t, dir, strings.ReplaceAll(name, " ", "-"), disk), image); err == nil {
			t.Errorf("%s: SameImage found the image", name)
		}
	}
	if err := Erased(deployed); err == nil || !strings.Contains(err.Error(), "not erased") {
		t.Errorf("Erased on a disk with a partition table: %v", err)
	}
	if err := Erased(testenv.WriteFile(t, dir, "zero", make([]byte, 1024*sector))); err != nil {
		t.Errorf("Erased on a zeroed disk: %v", err)
	}
	if err := HasTable(testenv.WriteFile(t, dir, "zero2", make([]byte, 1024*sector))); err == nil {
		t.Error("HasTable found a table on a zeroed disk")
	}
}
