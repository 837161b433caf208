#!/usr/bin/env bash
# Builds the OS image the Ironic tests deploy with the real agent: a small
# whole-disk image (raw, 24 MiB) with a GPT partition table and two
# partitions, built without root or loop devices:
#   1. an EFI system partition (FAT) holding \EFI\BOOT\BOOTX64.EFI, a
#      standalone GRUB that prints MARKER on the serial console, then the
#      release file of partition 2, and stays at its prompt;
#   2. "bmlab-root", ext4, holding /etc/bmlab-release ("BMLAB-OS-RELEASE
#      <hash>", the hash of this script and the marker).
# A UEFI machine that boots it from its disk prints both lines: it booted
# what the agent wrote, and GRUB read the second partition. Counting MARKER
# counts boots.
#
# usage: build-os-image.sh OUT.img [MARKER]
set -euo pipefail

out=${1:?usage: build-os-image.sh OUT.img [MARKER]}
marker=${2:-BMLAB-OS-BOOTED}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
release="BMLAB-OS-RELEASE $(cat "$0" <(echo "$marker") | sha256sum | cut -c1-12)"

# Layout in MiB: ESP 1-9, root 9-23, the backup GPT in the last MiB.
esp_start=1 esp_size=8 root_start=9 root_size=14 total=24

bash "$(dirname "$0")/build-marker-efi.sh" "$work/BOOTX64.EFI" "$marker" stay \
  "search --no-floppy --set=osroot --label bmlab-root
cat (\$osroot)/etc/bmlab-release" >/dev/null

dd if=/dev/zero of="$work/esp.img" bs=1M count=$esp_size status=none
mkfs.vfat -n BMLAB-ESP "$work/esp.img" >/dev/null
mmd -i "$work/esp.img" ::/EFI ::/EFI/BOOT
mcopy -i "$work/esp.img" "$work/BOOTX64.EFI" ::/EFI/BOOT/BOOTX64.EFI

mkdir -p "$work/root/etc"
echo "$release" >"$work/root/etc/bmlab-release"
mkfs.ext4 -q -F -L bmlab-root -d "$work/root" "$work/root.img" ${root_size}M >/dev/null

rm -f "$out.tmp"
truncate -s ${total}M "$out.tmp"
sfdisk -q "$out.tmp" <<EOF
label: gpt
start=${esp_start}MiB, size=${esp_size}MiB, type=C12A7328-F81F-11D2-BA4B-00A0C93EC93B, name="EFI System"
start=${root_start}MiB, size=${root_size}MiB, type=0FC63DAF-8483-4772-8E79-3D69D8477DE4, name="bmlab-root"
EOF
dd if="$work/esp.img" of="$out.tmp" bs=1M seek=$esp_start conv=notrunc,sparse status=none
dd if="$work/root.img" of="$out.tmp" bs=1M seek=$root_start conv=notrunc,sparse status=none
mv "$out.tmp" "$out"
echo "$out"
