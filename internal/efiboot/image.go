package efiboot

import (
	"encoding/binary"
	"fmt"
	"io"
)

// MaxApp is the largest application WriteISO takes: FAT16 with 32 KiB
// clusters holds about 2 GiB; a UEFI application (even a unified kernel
// image) is far smaller.
const MaxApp = 1 << 30

const (
	sector    = 512  // FAT sector
	isoSector = 2048 // ISO 9660 logical block

	rootEntries = 512 // FAT16 root directory entries: 32 sectors
	rootSectors = rootEntries * 32 / sector

	// FAT16 is a volume of 4085 to 65524 clusters (Microsoft's FAT
	// specification, "FAT Type Determination"); a few spare over the
	// minimum keep off the edge drivers disagree on.
	minClusters = 4085 + 16
	maxClusters = 65524
)

// fatDate is the date every entry carries (2020-01-01 00:00), so images are
// reproducible.
const fatDate = (2020-1980)<<9 | 1<<5 | 1

// fatLayout is a FAT16 volume holding one file at \EFI\BOOT\<name>.
type fatLayout struct {
	name         string // 8.3 upper-case, e.g. BOOTX64.EFI
	size         int64  // the file's bytes
	secPerClus   int
	clusters     int // data clusters of the volume
	fatSectors   int
	totalSectors int
}

func layout(name string, size int64) (fatLayout, error) {
	for spc := 1; spc <= 64; spc *= 2 {
		cb := int64(spc * sector)
		need := 2 + (size+cb-1)/cb // EFI and BOOT, then the file
		n := max(need+16, minClusters)
		if n > maxClusters {
			continue
		}
		fs := (int((n+2)*2) + sector - 1) / sector
		return fatLayout{
			name: name, size: size, secPerClus: spc, clusters: int(n), fatSectors: fs,
			totalSectors: 1 + 2*fs + rootSectors + int(n)*spc,
		}, nil
	}
	return fatLayout{}, fmt.Errorf("a %d-byte application does not fit a FAT16 volume", size)
}

func (l fatLayout) bytes() int64 { return int64(l.totalSectors) * sector }

// head returns the volume up to the file's data: boot sector, both FATs,
// the root directory and the clusters of \EFI and \EFI\BOOT.
func (l fatLayout) head() []byte {
	cb := l.secPerClus * sector
	dataStart := (1 + 2*l.fatSectors + rootSectors) * sector
	b := make([]byte, dataStart+2*cb)

	// Boot sector with the BIOS parameter block (FAT specification §3).
	bs := b[:sector]
	copy(bs, []byte{0xeb, 0x3c, 0x90})
	copy(bs[3:], "BMLAB   ")
	le16(bs[11:], sector)
	bs[13] = byte(l.secPerClus)
	le16(bs[14:], 1) // reserved sectors: the boot sector
	bs[16] = 2       // FATs
	le16(bs[17:], rootEntries)
	if l.totalSectors < 0x10000 {
		le16(bs[19:], uint16(l.totalSectors))
	} else {
		binary.LittleEndian.PutUint32(bs[32:], uint32(l.totalSectors))
	}
	bs[21] = 0xf8 // fixed media
	le16(bs[22:], uint16(l.fatSectors))
	le16(bs[24:], 63)  // sectors per track
	le16(bs[26:], 255) // heads
	bs[36] = 0x80      // drive number
	bs[38] = 0x29      // extended boot signature: the next three fields are valid
	binary.LittleEndian.PutUint32(bs[39:], 0xb31ab007)
	copy(bs[43:], "EFIBOOT    ")
	copy(bs[54:], "FAT16   ")
	bs[510], bs[511] = 0x55, 0xaa

	// The FAT: entries 0 and 1 reserved, 2 \EFI, 3 \EFI\BOOT, then the
	// file's chain.
	fat := make([]byte, l.fatSectors*sector)
	le16(fat[0:], 0xfff8)
	le16(fat[2:], 0xffff)
	le16(fat[4:], 0xffff)
	le16(fat[6:], 0xffff)
	n := int((l.size + int64(cb) - 1) / int64(cb))
	for i := range n {
		next := uint16(4 + i + 1)
		if i == n-1 {
			next = 0xffff
		}
		le16(fat[(4+i)*2:], next)
	}
	copy(b[sector:], fat)
	copy(b[sector+len(fat):], fat)

	root := b[(1+2*l.fatSectors)*sector:]
	dirent(root, "EFI", 0x10, 2, 0)
	efi := b[dataStart:]
	dirent(efi, ".", 0x10, 2, 0)
	dirent(efi[32:], "..", 0x10, 0, 0)
	dirent(efi[64:], "BOOT", 0x10, 3, 0)
	boot := b[dataStart+cb:]
	dirent(boot, ".", 0x10, 3, 0)
	dirent(boot[32:], "..", 0x10, 2, 0)
	first := 4
	if n == 0 {
		first = 0
	}
	dirent(boot[64:], l.name, 0x20, uint16(first), uint32(l.size))
	return b
}

// dirent writes a short-name directory entry (FAT specification §6).
func dirent(b []byte, name string, attr byte, cluster uint16, size uint32) {
	var short [11]byte
	for i := range short {
		short[i] = ' '
	}
	switch name {
	case ".", "..":
		copy(short[:], name)
	default:
		base, ext := name, ""
		for i := range name {
			if name[i] == '.' {
				base, ext = name[:i], name[i+1:]
			}
		}
		copy(short[:8], base)
		copy(short[8:], ext)
	}
	copy(b, short[:])
	b[11] = attr
	le16(b[16:], fatDate) // creation date
	le16(b[18:], fatDate) // last access
	le16(b[24:], fatDate) // write date
	le16(b[26:], cluster)
	binary.LittleEndian.PutUint32(b[28:], size)
}

func le16(b []byte, v uint16) { binary.LittleEndian.PutUint16(b, v) }

// ISO 9660 layout (ECMA-119) of the image WriteISO makes, in 2 KiB blocks.
const (
	lbaPVD       = 16
	lbaBootRec   = 17
	lbaTerm      = 18
	lbaPathL     = 19
	lbaPathM     = 20
	lbaRoot      = 21
	lbaCatalog   = 22
	lbaFAT       = 23
	imageFileID  = "EFIBOOT.IMG;1"
	volumeID     = "BMLAB_EFIBOOT"
	pathTableLen = 10
)

// ISOSize is the size of the ISO WriteISO makes for an application of
// size bytes for arch.
func ISOSize(size int64, arch string) (int64, error) {
	l, err := layout(bootNames[arch], size)
	if err != nil {
		return 0, err
	}
	return (lbaFAT + blocks(l.bytes())) * isoSector, nil
}

func blocks(n int64) int64 { return (n + isoSector - 1) / isoSector }

// WriteISO writes to w an ISO 9660 image whose El Torito boot catalog
// names one EFI boot image (platform 0xEF, no emulation): a FAT16 volume
// with app (size bytes, checked with CheckApp) as \EFI\BOOT\BOOTX64.EFI
// (BOOTAA64.EFI for aarch64). The volume is also the file EFIBOOT.IMG in
// the ISO's root, as xorriso's images have it.
func WriteISO(w io.Writer, app io.ReaderAt, size int64, arch string) error {
	name, ok := bootNames[arch]
	if !ok {
		return fmt.Errorf("no UEFI boot file name for %q machines", arch)
	}
	if size > MaxApp {
		return fmt.Errorf("the application is %d bytes, more than %d", size, MaxApp)
	}
	l, err := layout(name, size)
	if err != nil {
		return err
	}
	fatBytes := l.bytes()
	total := lbaFAT + blocks(fatBytes)

	sys := make([]byte, lbaFAT*isoSector)
	pvd := sys[lbaPVD*isoSector:]
	volumeDescriptor(pvd, 1)
	pad(pvd[8:40], "")
	pad(pvd[40:72], volumeID)
	both32(pvd[80:], uint32(total))
	both16(pvd[120:], 1) // volume set size
	both16(pvd[124:], 1) // volume sequence number
	both16(pvd[128:], isoSector)
	both32(pvd[132:], pathTableLen)
	binary.LittleEndian.PutUint32(pvd[140:], lbaPathL)
	binary.BigEndian.PutUint32(pvd[148:], lbaPathM)
	record(pvd[156:], "\x00", lbaRoot, isoSector, true)
	pad(pvd[190:318], "")
	pad(pvd[318:446], "")
	pad(pvd[446:574], "")
	pad(pvd[574:702], "BMLAB VBMCD UEFI HTTP BOOT")
	pad(pvd[702:813], "")
	for _, off := range []int{813, 830, 864} {
		copy(pvd[off:], "2020010100000000")
	}
	copy(pvd[847:], "0000000000000000") // no expiration
	pvd[881] = 1                        // file structure version

	// El Torito 1.0 §2.0: the boot record volume descriptor points at the
	// catalog.
	br := sys[lbaBootRec*isoSector:]
	volumeDescriptor(br, 0)
	copy(br[7:], "EL TORITO SPECIFICATION")
	binary.LittleEndian.PutUint32(br[0x47:], lbaCatalog)

	volumeDescriptor(sys[lbaTerm*isoSector:], 255)

	// Path tables (ECMA-119 §9.4): the root only.
	for _, t := range []struct {
		lba int
		bo  binary.ByteOrder
	}{{lbaPathL, binary.LittleEndian}, {lbaPathM, binary.BigEndian}} {
		p := sys[t.lba*isoSector:]
		p[0] = 1
		t.bo.PutUint32(p[2:], lbaRoot)
		t.bo.PutUint16(p[6:], 1)
	}

	// The root directory: itself, its parent (itself), EFIBOOT.IMG.
	root := sys[lbaRoot*isoSector:]
	n := record(root, "\x00", lbaRoot, isoSector, true)
	n += record(root[n:], "\x01", lbaRoot, isoSector, true)
	record(root[n:], imageFileID, lbaFAT, uint32(fatBytes), false)

	// El Torito §2.1-2.2: validation entry for the EFI platform, then the
	// default entry: no emulation, the FAT volume. The sector count is in
	// 512-byte units (as xorriso writes it); 0 when it does not fit asks
	// the firmware for the whole rest of the disc, which is the volume.
	cat := sys[lbaCatalog*isoSector:]
	cat[0] = 1
	cat[1] = 0xef
	copy(cat[4:], "BMLAB")
	cat[30], cat[31] = 0x55, 0xaa
	var sum uint16
	for i := 0; i < 32; i += 2 {
		sum += binary.LittleEndian.Uint16(cat[i:])
	}
	le16(cat[28:], -sum)
	def := cat[32:]
	def[0] = 0x88 // bootable
	if secs := fatBytes / sector; secs <= 0xffff {
		le16(def[6:], uint16(secs))
	}
	binary.LittleEndian.PutUint32(def[8:], lbaFAT)

	if _, err := w.Write(sys); err != nil {
		return err
	}
	if _, err := w.Write(l.head()); err != nil {
		return err
	}
	cr := io.NewSectionReader(app, 0, size)
	copied, err := io.Copy(w, cr)
	if err != nil {
		return err
	}
	if copied != size {
		return fmt.Errorf("read %d of the application's %d bytes", copied, size)
	}
	headBytes := int64(len(l.head()))
	rest := blocks(fatBytes)*isoSector - headBytes - size
	_, err = io.CopyN(w, zeros{}, rest)
	return err
}

type zeros struct{}

func (zeros) Read(b []byte) (int, error) {
	clear(b)
	return len(b), nil
}

// volumeDescriptor writes a descriptor's header (ECMA-119 §8.1).
func volumeDescriptor(b []byte, typ byte) {
	b[0] = typ
	copy(b[1:], "CD001")
	b[6] = 1
}

// record writes a directory record (ECMA-119 §9.1) and returns its length.
func record(b []byte, id string, lba, size uint32, dir bool) int {
	n := 33 + len(id)
	if n%2 == 1 {
		n++
	}
	b[0] = byte(n)
	both32(b[2:], lba)
	both32(b[10:], size)
	b[18] = 120 // 2020
	b[19] = 1
	b[20] = 1
	if dir {
		b[25] = 2
	}
	both16(b[28:], 1)
	b[32] = byte(len(id))
	copy(b[33:], id)
	return n
}

func both16(b []byte, v uint16) {
	binary.LittleEndian.PutUint16(b, v)
	binary.BigEndian.PutUint16(b[2:], v)
}

func both32(b []byte, v uint32) {
	binary.LittleEndian.PutUint32(b, v)
	binary.BigEndian.PutUint32(b[4:], v)
}

func pad(b []byte, s string) {
	for i := range b {
		b[i] = ' '
	}
	copy(b, s)
}
