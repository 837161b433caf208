#!/usr/bin/env bash
# Builds the boot-marker ISO: a grub-mkrescue image that boots under BIOS and
# UEFI, prints a marker line on the serial console and halts. Under TCG it
# boots in about a second (BIOS), which makes "the VM really booted from this
# media" a fast and honest assertion: read the serial log. The marker is
# printed once per boot, so counting it counts boots: on the serial terminal
# alone (OVMF copies the EFI console to the serial port, so "serial
# console" printed it twice per boot under UEFI).
#
# usage: build-marker-iso.sh OUT.iso [MARKER] [halt|stay] [arm64]
#   halt (default): power the VM off after the marker, a clean "boot done".
#   stay: leave the VM running at grub's prompt, for tests that need a
#         running machine that has visibly booted.
#   arm64: an aarch64 UEFI image only (grub-efi-arm64-bin): what an aarch64
#          machine (AAVMF) boots, and nothing else does. Without it the
#          image boots every platform grub-mkrescue finds installed (BIOS
#          and x86_64 UEFI; aarch64 UEFI too where grub-efi-arm64-bin is).
#          It boots in about 7 s under TCG, halt included.
set -euo pipefail

usage="usage: build-marker-iso.sh OUT.iso [MARKER] [halt|stay] [arm64]"
out=${1:?$usage}
marker=${2:-BMLAB-MARKER-BOOTED}
after=${3:-halt}
platform=${4:-}
case "$after" in
  halt) last=halt ;;
  stay) last="" ;;
  *) echo "third argument must be halt or stay, not $after" >&2; exit 2 ;;
esac
dir=()
# grub's serial console: an x86 machine's COM1; AAVMF's console is its
# serial port (PL011) already, and grub for arm64-efi has no COM port.
console="serial --unit=0 --speed=115200
terminal_input serial console
terminal_output serial"
case "$platform" in
  "") ;;
  arm64)
    dir=(-d /usr/lib/grub/arm64-efi)
    console="terminal_output console" ;;
  *) echo "fourth argument must be arm64 or nothing, not $platform" >&2; exit 2 ;;
esac
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

mkdir -p "$work/boot/grub"
cat >"$work/boot/grub/grub.cfg" <<CFG
$console
echo ""
echo "$marker"
$last
CFG
grub-mkrescue "${dir[@]}" -o "$out" "$work" -- -volid BMLAB_MARKER >/dev/null 2>&1 || {
  echo "grub-mkrescue failed: install grub-pc-bin grub-efi-amd64-bin grub-efi-arm64-bin xorriso mtools (hack/install-deps.sh)" >&2
  exit 1
}
echo "$out"
