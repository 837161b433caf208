#!/usr/bin/env bash
# Builds the text-UI test image, once per machine, into the tool cache
# (hack/toolcache.sh), linked into _out/tools/: a Debian kernel
# (tui-vmlinuz, from Debian's linux-image package, fetched with
# `apt-get download`) and a tiny initramfs (tui-initrd.img) holding
# busybox-static, whiptail with the libraries it loads and the "linux"
# terminfo entry, from the packages hack/install-deps.sh installs, and an
# /init that runs a whiptail menu and input box on the VGA console (tty1)
# and reports what was chosen on the serial port:
#
#   BMLAB-TUI-START                          when the menu is about to show
#   BMLAB-TUI choice=<tag> hostname=<value>  once both are answered
#
# The tests boot it directly (libvirt's <kernel> and <initrd>) and drive the
# menu through the BMC alone (internal/vbmcd, TestE2EScreenTextUI).
#
# The version key is the kernel package's, busybox's and whiptail's
# versions and this script's hash: any of them changed is another build.
set -euo pipefail
cd "$(dirname "$0")/.."
. hack/toolcache.sh

kpkg=$(apt-cache depends linux-image-amd64 | awk '/Depends: linux-image-[0-9]/ {print $2; exit}')
[ -n "$kpkg" ] || { echo "no linux-image package behind linux-image-amd64 (run apt-get update)" >&2; exit 1; }
kver=$(apt-cache policy "$kpkg" | awk '/Candidate:/ {print $2}')
ver() { dpkg-query -W -f='${Version}' "$1"; }
script=$(sha256sum "$0" | cut -c1-8)
VERSION="$kpkg-$kver-bb$(ver busybox-static)-wt$(ver whiptail)-$script"
VERSION=${VERSION//[:+~]/_}

build_tui() {
  local out=$1 work
  work=$(mktemp -d)
  trap 'rm -rf "$work"' RETURN
  (cd "$work" && apt-get download -q -o APT::Sandbox::User=root "$kpkg=$kver" >/dev/null)
  dpkg-deb -x "$work"/linux-image-*.deb "$work/k"
  cp "$work"/k/boot/vmlinuz-* "$out/tui-vmlinuz"

  local root=$work/root
  mkdir -p "$root"/{bin,dev,proc,sys,lib/terminfo/l,lib64,lib/x86_64-linux-gnu}
  cp /bin/busybox "$root/bin/busybox"
  "$root/bin/busybox" --help >/dev/null # the static one, runs alone
  cp /usr/bin/whiptail "$root/bin/whiptail"
  local lib
  for lib in $(ldd /usr/bin/whiptail | awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\/lib64\// {print $1}'); do
    cp -L "$lib" "$root$lib"
  done
  cp /lib/terminfo/l/linux "$root/lib/terminfo/l/linux"
  # whiptail finds every library it needs inside the image
  chroot "$root" /lib64/ld-linux-x86-64.so.2 --list /bin/whiptail >/dev/null
  cat >"$root/init" <<'INIT'
#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
export TERM=linux TERMINFO=/lib/terminfo
echo BMLAB-TUI-START >/dev/ttyS0
exec </dev/tty1 >/dev/tty1 2>&1
choice=$(whiptail --title "bmlab setup" --menu "Choose a role" 14 50 3 \
  alpha "the first role" bravo "the second role" charlie "the third role" 3>&1 1>&2 2>&3)
name=$(whiptail --title "bmlab setup" --inputbox "Hostname" 10 50 3>&1 1>&2 2>&3)
echo "BMLAB-TUI choice=$choice hostname=$name" >/dev/ttyS0
clear
echo "Configured $choice as $name"
while :; do sleep 3600; done
INIT
  chmod 755 "$root/init"
  (cd "$root" && find . | LC_ALL=C sort | cpio -o -H newc --quiet | gzip -9) >"$out/tui-initrd.img"
}
tool_cached tui "$VERSION" build_tui
