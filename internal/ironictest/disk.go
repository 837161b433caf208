package ironictest

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/bmlab/bmlab/internal/efivars"
)

// What a node's disk holds, read from the host: the checks of what the
// agent wrote (the deploy) and erased (cleaning).

const sector = 512

// Partition is an entry of a GUID partition table (UEFI 2.10 §5.3.3).
type Partition struct {
	Type, GUID  string // the partition type and unique partition GUIDs
	First, Last uint64 // LBAs, inclusive
	Name        string
	TypeIsESP   bool
	Index       int // 1-based, as Linux numbers them
}

// Label is a disk's partition table as its first and last sectors hold it.
type Label struct {
	// MBR: the MBR's signature 0x55AA at byte 510 (UEFI 2.10 §5.2.1), a
	// legacy table's or GPT's protective MBR.
	MBR bool
	// GPT: a GPT header ("EFI PART") at LBA 1 (the primary).
	GPT bool
	// BackupGPT: a GPT header at the disk's last LBA.
	BackupGPT bool
	// Partitions are the primary GPT's used entries.
	Partitions []Partition
}

// Empty reports whether the disk holds no partition table at all: what
// Ironic's automated cleaning (the agent's erase_devices_metadata) leaves.
func (l Label) Empty() bool { return !l.MBR && !l.GPT && !l.BackupGPT }

func (l Label) String() string {
	if l.Empty() {
		return "no partition table"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "MBR signature %v, primary GPT %v, backup GPT %v", l.MBR, l.GPT, l.BackupGPT)
	for _, p := range l.Partitions {
		fmt.Fprintf(&b, "; partition %d %q LBA %d-%d", p.Index, p.Name, p.First, p.Last)
	}
	return b.String()
}

var espType = "C12A7328-F81F-11D2-BA4B-00A0C93EC93B"

// ReadLabel reads the partition table of a raw disk of size bytes.
func ReadLabel(r io.ReaderAt, size int64) (Label, error) {
	var l Label
	if size < 34*sector {
		return l, fmt.Errorf("a disk of %d bytes holds no partition table", size)
	}
	mbr := make([]byte, sector)
	if _, err := r.ReadAt(mbr, 0); err != nil {
		return l, fmt.Errorf("read the MBR: %w", err)
	}
	l.MBR = mbr[510] == 0x55 && mbr[511] == 0xaa
	hdr := make([]byte, sector)
	if _, err := r.ReadAt(hdr, sector); err != nil {
		return l, fmt.Errorf("read LBA 1: %w", err)
	}
	l.GPT = bytes.HasPrefix(hdr, []byte("EFI PART"))
	last := make([]byte, sector)
	if _, err := r.ReadAt(last, size/sector*sector-sector); err != nil {
		return l, fmt.Errorf("read the last LBA: %w", err)
	}
	l.BackupGPT = bytes.HasPrefix(last, []byte("EFI PART"))
	if !l.GPT {
		return l, nil
	}
	// The header (UEFI 2.10 §5.3.2): the entries' LBA at 72, their count
	// at 80 and size at 84.
	entriesLBA := binary.LittleEndian.Uint64(hdr[72:])
	count := binary.LittleEndian.Uint32(hdr[80:])
	esize := binary.LittleEndian.Uint32(hdr[84:])
	if esize < 128 || count > 1024 {
		return l, fmt.Errorf("GPT header: %d entries of %d bytes", count, esize)
	}
	entries := make([]byte, int(count)*int(esize))
	if _, err := r.ReadAt(entries, int64(entriesLBA)*sector); err != nil {
		return l, fmt.Errorf("read the GPT entries: %w", err)
	}
	for i := 0; i < int(count); i++ {
		e := entries[i*int(esize) : (i+1)*int(esize)]
		if bytes.Equal(e[:16], make([]byte, 16)) {
			continue
		}
		p := Partition{Type: strings.ToUpper(string(efivars.GUIDOf(e[0:16]))), GUID: strings.ToUpper(string(efivars.GUIDOf(e[16:32]))), First: binary.LittleEndian.Uint64(e[32:]),
			Last: binary.LittleEndian.Uint64(e[40:]), Name: efivars.UTF16Name(e[56:128]), Index: i + 1}
		p.TypeIsESP = p.Type == espType
		l.Partitions = append(l.Partitions, p)
	}
	return l, nil
}

// DiskLabel reads the partition table of the disk image at path: raw, or
// qcow2 (qemu-img converts it to a sparse raw file first).
func DiskLabel(path string) (Label, error) {
	raw, done, err := rawDisk(path)
	if err != nil {
		return Label{}, err
	}
	defer done()
	f, err := os.Open(raw)
	if err != nil {
		return Label{}, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return Label{}, err
	}
	l, err := ReadLabel(f, st.Size())
	if err != nil {
		return l, fmt.Errorf("disk %s: %w", path, err)
	}
	return l, nil
}

// rawDisk is the disk image at path in raw form: itself, or a qcow2
// image (its magic "QFI\xfb") converted by qemu-img into a temporary
// sparse file (removed by done).
func rawDisk(path string) (raw string, done func(), err error) {
	f, err := os.Open(path)
	if err != nil {
		return "", nil, err
	}
	magic := make([]byte, 4)
	_, err = io.ReadFull(f, magic)
	f.Close()
	if err != nil || string(magic) != "QFI\xfb" {
		return path, func() {}, nil
	}
	d, err := os.MkdirTemp("", "bmlab-disk-")
	if err != nil {
		return "", nil, err
	}
	raw = filepath.Join(d, "disk.raw")
	if b, err := exec.Command("qemu-img", "convert", "-U", "-O", "raw", path, raw).CombinedOutput(); err != nil {
		os.RemoveAll(d)
		return "", nil, fmt.Errorf("qemu-img convert %s: %w: %s", path, err, b)
	}
	return raw, func() { os.RemoveAll(d) }, nil
}

// SameImage checks that the disk at path holds the whole-disk image at
// image, as the agent writes it: the same GPT entries (types, GUIDs,
// names, places) and, in every partition, the same bytes. The GPT's
// backup header may have moved to the disk's end (the agent fixes it).
func SameImage(path, image string) error {
	disk, done, err := rawDisk(path)
	if err != nil {
		return err
	}
	defer done()
	d, err := os.Open(disk)
	if err != nil {
		return err
	}
	defer d.Close()
	im, err := os.Open(image)
	if err != nil {
		return err
	}
	defer im.Close()
	dst, _ := d.Stat()
	ist, _ := im.Stat()
	want, err := ReadLabel(im, ist.Size())
	if err != nil {
		return fmt.Errorf("image %s: %w", image, err)
	}
	got, err := ReadLabel(d, dst.Size())
	if err != nil {
		return fmt.Errorf("disk %s: %w", path, err)
	}
	if !want.GPT || len(want.Partitions) == 0 {
		return fmt.Errorf("image %s has no GPT partitions", image)
	}
	if !got.GPT || len(got.Partitions) != len(want.Partitions) {
		return fmt.Errorf("disk %s: %s; the image: %s", path, got, want)
	}
	for i, w := range want.Partitions {
		g := got.Partitions[i]
		if g != w {
			return fmt.Errorf("disk %s: partition %d is %+v, the image's %+v", path, w.Index, g, w)
		}
		n := int64(w.Last-w.First+1) * sector
		hw, hg := sha256.New(), sha256.New()
		if _, err := io.Copy(hw, io.NewSectionReader(im, int64(w.First)*sector, n)); err != nil {
			return err
		}
		if _, err := io.Copy(hg, io.NewSectionReader(d, int64(w.First)*sector, n)); err != nil {
			return err
		}
		if !bytes.Equal(hw.Sum(nil), hg.Sum(nil)) {
			return fmt.Errorf("disk %s: partition %d (%s) differs from the image's", path, w.Index, w.Name)
		}
	}
	return nil
}

// HasTable fails unless the disk at path holds a partition table.
func HasTable(path string) error {
	l, err := DiskLabel(path)
	if err != nil {
		return err
	}
	if l.Empty() {
		return fmt.Errorf("disk %s holds no partition table", path)
	}
	return nil
}

// Erased fails unless the disk at path holds no partition table: no MBR
// signature, no GPT header at either end.
func Erased(path string) error {
	l, err := DiskLabel(path)
	if err != nil {
		return err
	}
	if !l.Empty() {
		return fmt.Errorf("disk %s is not erased: %s", path, l)
	}
	return nil
}
