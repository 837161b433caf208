package efiboot

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// ErrNotApp is returned for a file that is not a UEFI application for the
// asked architecture; the error says what it is instead.
var ErrNotApp = errors.New("not a UEFI application")

// PE/COFF machine types (PE format, "Machine Types") and the UEFI
// architectures they are.
var machines = map[uint16]string{
	0x014c: "i386",
	0x8664: "x86_64",
	0xaa64: "aarch64",
	0x01c2: "arm",
	0x01c4: "arm",
	0x5064: "riscv64",
	0x6264: "loongarch64",
}

// bootNames are the removable-media boot file names of UEFI 2.10 §3.5.1.1
// for the architectures a machine here may have.
var bootNames = map[string]string{
	"x86_64":  "BOOTX64.EFI",
	"aarch64": "BOOTAA64.EFI",
}

// Subsystems of a PE image that UEFI loads (PE format, "Windows Subsystem").
const (
	subsystemEFIApplication = 10
	subsystemEFIBootDriver  = 11
	subsystemEFIRuntime     = 12
)

// CheckApp reports whether r (size bytes) is a UEFI application a machine
// of arch (x86_64, aarch64) runs: a PE32+ image ("MZ", then "PE\0\0" at
// e_lfanew) for that machine type with the EFI application subsystem. The
// error (ErrNotApp) names what the file is instead.
func CheckApp(r io.ReaderAt, size int64, arch string) error {
	if _, ok := bootNames[arch]; !ok {
		return fmt.Errorf("%w: UEFI applications for %q machines are not supported (only x86_64 and aarch64)", ErrNotApp, arch)
	}
	var dos [64]byte
	if _, err := r.ReadAt(dos[:], 0); err != nil || dos[0] != 'M' || dos[1] != 'Z' {
		return fmt.Errorf("%w: no PE/COFF image (no MZ header at byte 0)", ErrNotApp)
	}
	off := int64(binary.LittleEndian.Uint32(dos[0x3c:]))
	var hdr [24 + 70]byte // signature, COFF header, the optional header up to Subsystem
	if off < 64 || off+int64(len(hdr)) > size {
		return fmt.Errorf("%w: an MZ file whose PE header offset (%d) is outside its %d bytes", ErrNotApp, off, size)
	}
	if _, err := r.ReadAt(hdr[:], off); err != nil || string(hdr[:4]) != "PE\x00\x00" {
		return fmt.Errorf("%w: an MZ file without a PE signature at byte %d (a DOS program?)", ErrNotApp, off)
	}
	machine := binary.LittleEndian.Uint16(hdr[4:])
	if got := machines[machine]; got != arch {
		name := got
		if name == "" {
			name = fmt.Sprintf("machine type %#04x", machine)
		}
		return fmt.Errorf("%w: a PE image for %s, and this machine is %s", ErrNotApp, name, arch)
	}
	opt := hdr[24:]
	if magic := binary.LittleEndian.Uint16(opt); magic != 0x20b {
		return fmt.Errorf("%w: a PE image whose optional header is not PE32+ (magic %#x)", ErrNotApp, magic)
	}
	switch sub := binary.LittleEndian.Uint16(opt[68:]); sub {
	case subsystemEFIApplication:
		return nil
	case subsystemEFIBootDriver, subsystemEFIRuntime:
		return fmt.Errorf("%w: a UEFI driver (subsystem %d), which firmware loads but does not boot", ErrNotApp, sub)
	default:
		return fmt.Errorf("%w: a PE image for subsystem %d (a Windows program?), not a UEFI application (10)", ErrNotApp, sub)
	}
}
