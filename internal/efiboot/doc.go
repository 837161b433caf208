// Package efiboot makes a UEFI application (an iPXE, shim or GRUB .efi) a
// medium UEFI firmware boots by its default path: a FAT file system holding
// it as \EFI\BOOT\BOOTX64.EFI (BOOTAA64.EFI for aarch64), put as the El
// Torito EFI boot image of an ISO 9660 image. vbmcd gives it to a machine's
// CD drive when a UEFI HTTP boot's URI names an application instead of an
// ISO; OVMF then finds and runs the application itself.
//
// Everything here is pure Go and deterministic: the same application makes
// the same image, byte for byte, so a cache keeps one copy.
package efiboot
