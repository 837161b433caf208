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
# usage: build-marker-efi.sh OUT.efi [MARKER] [halt|stay]
set -euo pipefail

out=${1:?usage: build-marker-efi.sh OUT.efi [MARKER] [halt|stay]}
marker=${2:-BMLAB-EFI-BOOTED}
after=${3:-halt}
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
$last
CFG
# Only the modules the script needs: the binary stays small (about 1 MB),
# as an iPXE or shim binary is.
grub-mkstandalone -O x86_64-efi -o "$out" \
  --install-modules="normal echo serial terminal halt efi_gop efi_uga" \
  --modules="serial terminal" --locales= --fonts= --themes= \
  "boot/grub/grub.cfg=$work/grub.cfg" >/dev/null 2>&1 || {
  echo "grub-mkstandalone failed: install grub-efi-amd64-bin (hack/install-deps.sh)" >&2
  exit 1
}
echo "$out"
