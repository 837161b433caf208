#!/usr/bin/env bash
# Builds the boot-marker EFI binary: a standalone GRUB for x86_64 UEFI
# (grub-mkstandalone, the grub.cfg in its memdisk) that prints a marker line
# on the serial console and powers the machine off. It is what a UEFI HTTP
# boot loads when the URI names an EFI application (an iPXE or shim .efi)
# rather than an ISO: a PE32+ image the firmware runs itself. Output goes to
# the serial port only (OVMF copies its console there too, which would print
# the marker twice), so the marker is printed once per boot and counting it
# counts boots.
#
# A fourth argument is more grub.cfg lines, run after the marker (an OS
# image's: hack/build-os-image.sh).
#
# usage: build-marker-efi.sh OUT.efi [MARKER] [halt|stay] [GRUB-LINES]
set -euo pipefail

out=${1:?usage: build-marker-efi.sh OUT.efi [MARKER] [halt|stay] [GRUB-LINES]}
marker=${2:-BMLAB-EFI-BOOTED}
after=${3:-halt}
more=${4:-}
case "$after" in
  halt) last=halt ;;
  stay) last="" ;;
  *) echo "third argument must be halt or stay, not $after" >&2; exit 2 ;;
esac
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

cat >"$work/grub.cfg" <<CFG
serial --unit=0 --speed=115200
terminal_input serial console
terminal_output serial
echo ""
echo "$marker"
$more
$last
CFG
# Only the modules the script needs: the binary stays small (about 1 MB),
# as an iPXE or shim binary is. (Those that read partitions serve the
# extra lines.)
grub-mkstandalone -O x86_64-efi -o "$out" \
  --install-modules="normal echo serial terminal halt efi_gop efi_uga cat search search_label part_gpt fat ext2" \
  --modules="serial terminal part_gpt ext2 search_label" --locales= --fonts= --themes= \
  "boot/grub/grub.cfg=$work/grub.cfg" >/dev/null 2>&1 || {
  echo "grub-mkstandalone failed: install grub-efi-amd64-bin (hack/install-deps.sh)" >&2
  exit 1
}
echo "$out"
