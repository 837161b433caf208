#!/usr/bin/env bash
# Installs every host dependency of the project from Debian's packages.
# Idempotent: packages already present are skipped by apt.
set -euo pipefail

PKGS=(
  # libvirt and qemu (TCG works without /dev/kvm)
  libvirt-daemon-system libvirt-clients qemu-system-x86 qemu-utils qemu-block-extra ovmf
  dnsmasq-base iproute2 iptables
  # aarch64 nodes: qemu-system-aarch64 and AAVMF (UEFI for aarch64)
  qemu-system-arm qemu-efi-aarch64
  # a subreaper: where PID 1 does not reap orphans, libvirt's daemonized qemu
  # processes would stay zombies and libvirtd would wait for them forever
  tini
  # the boot-marker ISO; the OS image the Ironic tests deploy
  # (hack/build-os-image.sh: sfdisk, mkfs.vfat, mkfs.ext4)
  grub-pc-bin grub-efi-amd64-bin grub-common xorriso mtools fdisk dosfstools e2fsprogs
  # Debian 13 (trixie) roots into the tool cache: the deploy ramdisk
  # (hack/build-ipa-ramdisk.sh) and Ironic 29 (hack/build-ironic-root.sh)
  mmdebstrap zstd cpio
  # the aarch64 marker ISO: grub's arm64-efi modules, an arm64 package (Debian
  # builds it for arm64 only), so dpkg gets the arm64 architecture first
  grub-efi-arm64-bin:arm64
  # real protocol clients
  ipmitool freeipmi-tools python3-sushy python3-pyghmi redfishtool curl
  # Ironic 21.4 (the tests run `ironic`, API and conductor in one process,
  # themselves: internal/ironictest) and the fence agents of a two-node
  # cluster (fence_redfish, fence_ipmilan)
  ironic-api ironic-conductor fence-agents
  # the iPXE binaries the Ironic tests' network boot hands PXE firmware by
  # TFTP (internal/ironictest's PXE: snponly.efi, undionly.kpxe)
  ipxe
  # the demo lab's placeholder SSH key
  openssh-client
  # the daemons the hybrid mode's static pods configure, and a DNS client
  keepalived haproxy bind9-dnsutils
  # the browser the web console's tests drive (chromedp)
  chromium
  # systemd-analyze, to verify the shipped vbmcd unit
  systemd
  # ping across the VXLAN that joins a lab's bridges on two hosts
  iputils-ping
  # labctl graph's SVG and PNG
  graphviz
  # the LLDP tests' receiver: decodes the frames on a node's tap
  tcpdump
  # the hands-free console: OCR of a machine's screen (labctl console
  # wait-for, internal/bmcscreen), Dell's screenshot call from Python, and
  # the text-UI test image (hack/build-tui-image.sh: busybox and whiptail
  # in an initramfs packed with cpio)
  tesseract-ocr tesseract-ocr-eng python3-requests busybox-static whiptail cpio
  # running vbmcd's OCI image (make image): podman, with runc (crun refuses
  # a hybrid cgroup hierarchy)
  podman runc
)

missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "installing: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  # Packages must not start their daemons (ironic-api on 6385, tftpd-hpa,
  # xinetd): the tests start what they need. Without a policy of the
  # host's, one that refuses every start is in place during the install.
  policy=/usr/sbin/policy-rc.d
  if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' >"$policy"; chmod 755 "$policy"
    trap 'rm -f "$policy"' EXIT
  fi
  for p in "${missing[@]}"; do
    if [[ $p == *:arm64 ]] && ! dpkg --print-foreign-architectures | grep -qx arm64; then
      dpkg --add-architecture arm64
    fi
  done
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
echo "host dependencies present"
