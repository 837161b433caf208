#!/usr/bin/env bash
# Builds a Debian 13 (trixie) root holding Ironic 29.0.5 (ironic-api,
# ironic-conductor, python3-sushy 5.5), once per machine, into the tool
# cache (hack/toolcache.sh, hack/trixie.sh), linked as _out/tools/ironic-29:
#
#   ${BMLAB_TOOLS_CACHE:-/var/cache/bmlab/tools}/ironic-29.0.5-<hash>/ironic-29/
#     root/          the root
#     packages.txt   every package and version it holds
#     root.log       mmdebstrap's log
#
# internal/ironictest runs Ironic 29 from it (Options.Release "29": a mount
# namespace whose / is this root, read-only, with the host's /tmp, /dev/shm,
# /proc, /sys and /dev), beside Debian 12's Ironic 21.4 on the host. It also
# holds what the vendors' hardware types need (python3-sushy-oem-idrac for
# idrac, python3-proliantutils for ilo), and what Ironic builds boot ISOs
# with: isolinux and syslinux-common (BIOS), dosfstools and mtools (an ESP),
# zstd (Ironic 29 decompresses zstd images it downloads). Nothing in it runs
# as a service: the test starts `ironic` itself.
#
# Cold, on a 2-core machine: see docs/performance.md (Ironic).
set -euo pipefail
cd "$(dirname "$0")/.."
. hack/trixie.sh
IRONIC_VERSION=29.0.5

build_ironic_root() {
  local root=$1/ironic-29/root
  mkdir -p "$1/ironic-29"
  trixie_root "$root" minbase \
    ironic-api,ironic-conductor,python3-sushy,python3-sushy-oem-idrac,python3-proliantutils,ipmitool,isolinux,syslinux-common,dosfstools,mtools,genisoimage,zstd
  require_version "$root" ironic-conductor "$IRONIC_VERSION"
  require_version "$root" python3-sushy 5.5.0
  package_versions "$root" >"$1/ironic-29/packages.txt"
  # What the root no longer needs: apt's lists and caches.
  rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*
  # Ironic runs from it read-only: every module compiled now.
  chroot "$root" python3 -m compileall -q /usr/lib/python3/dist-packages >/dev/null 2>&1 || true
}

tool_cached ironic "$IRONIC_VERSION-$(scripts_hash hack/build-ironic-root.sh hack/trixie.sh)" build_ironic_root
