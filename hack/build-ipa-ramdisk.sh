#!/usr/bin/env bash
# Builds the deploy ramdisk: ironic-python-agent 10.2.0 and the Linux kernel
# from Debian 13 (trixie)'s packages, once per machine, into the tool cache
# (hack/toolcache.sh, hack/trixie.sh), linked as _out/tools/ipa-ramdisk:
#
#   ${BMLAB_TOOLS_CACHE:-/var/cache/bmlab/tools}/ipa-ramdisk-10.2.0-<hash>/ipa-ramdisk/
#     vmlinuz        the kernel (Ironic's deploy_kernel)
#     initramfs      the whole root, a zstd cpio (Ironic's deploy_ramdisk)
#     esp.img        a FAT EFI system partition whose GRUB reads the
#                    grub.cfg Ironic writes on the ISOs it builds from the
#                    two above (Ironic's [conductor]bootloader)
#     ipa.iso        kernel and initramfs on an ISO that boots BIOS and UEFI
#                    (grub-mkrescue), console on the serial port, without
#                    Ironic's URL (the agent then looks for it by mDNS)
#     packages.txt   every package and version the root holds
#     modules.txt    the kernel modules it keeps
#
# Small and quick to boot under TCG: no init system (hack/ipa-ramdisk/init:
# the kernel's filesystems, udev, dhcpcd, then the agent); no
# documentation, manual pages, locales or firmware; of the kernel's modules
# only those a virtio or q35 VM needs (virtio, AHCI, NVMe, e1000/e1000e,
# the filesystems the agent mounts) and the in-band IPMI ones (ipmi_si,
# ipmi_devintf, ipmi_msghandler; ipmitool is there); and of the agent's
# dependencies in Debian none of those it never runs in a deploy (libguestfs,
# git, stress-ng, sysbench, fio, tuned, lldpad, chrony, open-iscsi, …: a
# local package, bmlab-ipa-omitted, stands in for them). It keeps what the
# agent's collectors use, LLDP included (the agent reads LLDP itself), and
# python3-hardware for the extra-hardware collector.
#
# The agent takes Ironic's URL from the kernel command line (ipa-api-url,
# as Ironic sets it) and its address by DHCP.
set -euo pipefail
cd "$(dirname "$0")/.."
. hack/trixie.sh
IPA_VERSION=10.2.0
SCRIPTS=(hack/build-ipa-ramdisk.sh hack/trixie.sh hack/ipa-ramdisk/init hack/ipa-ramdisk/poweroff)

# What the agent's Debian package depends on but a deploy ramdisk never
# runs: a package of our own provides these names.
# python3-tooz's drivers for coordination backends (etcd, redis, memcached,
# MySQL, ZooKeeper) too: tooz itself stays (the agent imports it), the
# agent's burn-in coordination is never configured here.
OMITTED=(libguestfs-tools python3-guestfs python3-libvirt git man-db tuned stress-ng sysbench fio
  infiniband-diags open-iscsi lldpad chrony python3-kazoo python3-etcd3 python3-etcd3gw python3-grpcio
  python3-redis python3-pymemcache python3-pymysql python3-zake)

# The kernel modules kept (and what they depend on).
MODULES=(virtio_pci virtio_blk virtio_scsi virtio_net virtio_rng virtio_console virtio_balloon
  ahci ata_piix sd_mod sr_mod sg nvme e1000 e1000e
  isofs vfat nls_cp437 nls_ascii nls_iso8859-1 nls_utf8 ext4 xfs efivarfs loop squashfs overlay
  8021q raid1 raid10 raid456 md_mod dm_mod
  ipmi_si ipmi_devintf ipmi_msghandler ipmi_ssif)

omitted_deb() { # DIR: builds the stand-in package, prints its path
  local d=$1/bmlab-ipa-omitted
  mkdir -p "$d/DEBIAN"
  cat >"$d/DEBIAN/control" <<EOF
Package: bmlab-ipa-omitted
Version: 1.0
Architecture: all
Maintainer: bmlab <bmlab@localhost>
Provides: $(IFS=,; echo "${OMITTED[*]}" | sed 's/,/, /g')
Description: stands in for what bmlab's deploy ramdisk leaves out
 ironic-python-agent's package depends on these; a deploy never runs them.
EOF
  dpkg-deb --build --root-owner-group "$d" "$1/bmlab-ipa-omitted.deb" >/dev/null
  echo "$1/bmlab-ipa-omitted.deb"
}

build_ipa_ramdisk() {
  # work/ is inside the cache's temporary directory: a failed build
  # leaves nothing behind (tool_cached removes it).
  local out=$1/ipa-ramdisk work=$1/work
  mkdir -p "$out" "$work"
  local root=$work/root
  # The stand-in package first (a path: an --include of its own, and the
  # hook that makes it visible inside the root): apt then takes its names
  # as provided.
  trixie_root "$root" minbase \
    ironic-python-agent,linux-image-amd64,udev,systemd-standalone-sysusers,dhcpcd-base,iproute2,kmod,ipmitool,python3-hardware,lshw,dmidecode,pciutils,ethtool,gdisk,parted,util-linux,bsdextrautils,psmisc,file \
    --include="$(omitted_deb "$work")" --hook-dir=/usr/share/mmdebstrap/hooks/file-mirror-automount
  require_version "$root" ironic-python-agent "$IPA_VERSION"
  package_versions "$root" >"$out/packages.txt"

  # The kernel, and only the modules kept.
  local kver
  kver=$(basename "$(ls -d "$root"/lib/modules/*)")
  cp "$root/boot/vmlinuz-$kver" "$out/vmlinuz"
  local keep=$work/modules.keep
  for m in "${MODULES[@]}"; do
    chroot "$root" modprobe -S "$kver" --show-depends "$m" 2>/dev/null | awk '$1 == "insmod" {print $2}'
  done | sort -u >"$keep"
  (cd "$root" && find "lib/modules/$kver/kernel" -type f | sed 's|^|/|' | sort) >"$work/modules.all"
  comm -23 "$work/modules.all" "$keep" | sed 's|^/||' | (cd "$root" && xargs rm -f)
  find "$root/lib/modules/$kver/kernel" -type d -empty -delete
  chroot "$root" depmod "$kver"
  sed "s|/lib/modules/$kver/kernel/||" "$keep" >"$out/modules.txt"

  # What no deploy reads: documentation, locales, firmware (a virtio VM
  # needs none), udev's hardware database (vendor names), the IEEE's OUI
  # lists (netaddr's vendor lookups), glibc's charset converters, perl and
  # the package database (nothing installs packages in a ramdisk), the
  # Python packages' tests.
  rm -rf "$root"/boot/* "$root"/usr/share/doc "$root"/usr/share/man "$root"/usr/share/info \
    "$root"/usr/share/locale "$root"/usr/share/i18n "$root"/usr/share/zoneinfo "$root"/usr/share/bash-completion \
    "$root"/usr/lib/firmware "$root"/var/cache/apt "$root"/var/lib/apt/lists "$root"/var/cache/debconf \
    "$root"/usr/share/python-babel-localedata "$root"/usr/lib/udev/hwdb.bin "$root"/usr/lib/udev/hwdb.d \
    "$root"/usr/share/ieee-data "$root"/usr/lib/x86_64-linux-gnu/gconv "$root"/usr/share/perl* \
    "$root"/usr/lib/x86_64-linux-gnu/perl* "$root"/usr/bin/perl* "$root"/var/lib/dpkg/info
  find "$root"/usr/lib/python3/dist-packages -depth -type d -name tests -exec rm -rf {} +
  rm -rf "$root"/usr/lib/python3/dist-packages/docutils
  rm -f "$root"/usr/bin/qemu-nbd "$root"/usr/bin/qemu-io "$root"/usr/bin/qemu-storage-daemon
  # Bytecode for every module, made now: the agent starts without
  # compiling anything (under TCG that is many seconds).
  chroot "$root" python3 -m compileall -q -j 0 /usr/lib/python3/dist-packages /usr/lib/python3.13 >/dev/null 2>&1 || true

  # The ramdisk's own: init, poweroff and reboot, the console.
  install -m 0755 hack/ipa-ramdisk/init "$root/init"
  install -m 0755 hack/ipa-ramdisk/poweroff "$root/usr/local/sbin/poweroff"
  ln -sf poweroff "$root/usr/local/sbin/reboot"
  rm -f "$root/dev/console" "$root/dev/null"
  mknod -m 600 "$root/dev/console" c 5 1
  mknod -m 666 "$root/dev/null" c 1 3
  echo ipa >"$root/etc/hostname"
  printf '127.0.0.1 localhost ipa\n::1 localhost\n' >"$root/etc/hosts"

  echo "ramdisk root: $(du -sh "$root" | cut -f1)"
  (cd "$root" && find . -mindepth 1 | LC_ALL=C sort | cpio --quiet -o -H newc -R 0:0) |
    nice -n 10 zstd -q -T0 -9 -o "$out/initramfs"

  # The ESP Ironic builds its UEFI ISOs with: GRUB, which finds the ISO's
  # grub.cfg (Ironic's [DEFAULT]grub_config_path, EFI/BOOT/grub.cfg). Its
  # modules stay in its memdisk (its prefix).
  local grubdir=$work/grub
  mkdir -p "$grubdir"
  cat >"$grubdir/grub.cfg" <<'CFG'
search --no-floppy --set=root --file /EFI/BOOT/grub.cfg
configfile ($root)/EFI/BOOT/grub.cfg
CFG
  grub-mkstandalone -O x86_64-efi -o "$grubdir/BOOTX64.EFI" --locales= --fonts= --themes= \
    "boot/grub/grub.cfg=$grubdir/grub.cfg" >/dev/null
  dd if=/dev/zero of="$out/esp.img" bs=1M count=8 status=none
  mkfs.vfat -n ESP "$out/esp.img" >/dev/null
  mmd -i "$out/esp.img" ::/EFI ::/EFI/BOOT
  mcopy -i "$out/esp.img" "$grubdir/BOOTX64.EFI" ::/EFI/BOOT/BOOTX64.EFI

  # A stand-alone ISO of the same kernel and initramfs.
  local iso=$work/iso
  mkdir -p "$iso/boot/grub"
  cp "$out/vmlinuz" "$iso/vmlinuz"
  cp "$out/initramfs" "$iso/initramfs"
  cat >"$iso/boot/grub/grub.cfg" <<'CFG'
serial --unit=0 --speed=115200
terminal_input serial console
terminal_output serial console
set timeout=1
menuentry "ironic-python-agent (bmlab)" {
  linux /vmlinuz console=tty0 console=ttyS0,115200 ipa-insecure=1
  initrd /initramfs
}
CFG
  grub-mkrescue -o "$out/ipa.iso" "$iso" -- -volid BMLAB_IPA >/dev/null 2>&1
  rm -rf "$work"
  ls -l "$out"
}

tool_cached ipa-ramdisk "$IPA_VERSION-$(scripts_hash "${SCRIPTS[@]}")" build_ipa_ramdisk
