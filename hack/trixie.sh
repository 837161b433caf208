# Sourced by the scripts that build Debian 13 (trixie) trees into the tool
# cache (build-ironic-root.sh, build-ipa-ramdisk.sh): bookworm's mmdebstrap
# (hack/install-deps.sh installs it) makes a trixie root from Debian's
# packages, under nice, without documentation, manual pages or locales.
#
# A cache entry's version is the pinned upstream version of what it is
# built for plus the hash of the scripts that build it (scripts_hash): a
# changed script is another build. The packages' exact versions, as the
# build resolved them, are written beside what it built (packages.txt).
. hack/toolcache.sh

TRIXIE_MIRROR=${BMLAB_TRIXIE_MIRROR:-http://deb.debian.org/debian}

# scripts_hash FILE...: 8 hex digits of the hash of these files, in order.
scripts_hash() {
  cat "$@" | sha256sum | cut -c1-8
}

# trixie_root DIR VARIANT INCLUDES [MMDEBSTRAP_ARGS...]: a trixie root in
# DIR (which must not exist or be empty), with the packages in INCLUDES
# (comma-separated, as --include takes them). Its log goes to DIR.log.
trixie_root() {
  local dir=$1 variant=$2 include=$3
  shift 3
  command -v mmdebstrap >/dev/null || { echo "mmdebstrap is missing: bash hack/install-deps.sh" >&2; return 1; }
  local start=$SECONDS
  if ! nice -n 10 mmdebstrap --mode=root --variant="$variant" --include="$include" \
    --components=main \
    --dpkgopt='path-exclude=/usr/share/man/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' \
    --dpkgopt='path-include=/usr/share/locale/locale.alias' \
    --dpkgopt='path-exclude=/usr/share/doc/*' \
    --dpkgopt='path-include=/usr/share/doc/*/copyright' \
    --dpkgopt='path-exclude=/usr/share/info/*' \
    --dpkgopt='path-exclude=/usr/share/lintian/*' \
    --aptopt='Acquire::Retries "3"' \
    "$@" trixie "$dir" "$TRIXIE_MIRROR" >"$dir.log" 2>&1; then
    tail -30 "$dir.log" >&2
    echo "mmdebstrap trixie into $dir failed (whole log: $dir.log)" >&2
    return 1
  fi
  echo "trixie root $dir: $((SECONDS - start)) s, $(du -sh "$dir" | cut -f1)"
}

# package_versions ROOT: every installed package and its version.
package_versions() {
  chroot "$1" dpkg-query -W -f='${Package} ${Version}\n' | LC_ALL=C sort
}

# require_version ROOT PACKAGE UPSTREAM: fails unless PACKAGE's version in
# ROOT is UPSTREAM (epoch and Debian revision aside): trixie moved on, and
# the script's pin with it.
require_version() {
  local got
  got=$(chroot "$1" dpkg-query -W -f='${Version}' "$2")
  got=${got#*:}
  got=${got%-*}
  [ "$got" = "$3" ] || { echo "trixie has $2 $got, this script pins $3: update the pin (and what depends on it)" >&2; return 1; }
}
