#!/usr/bin/env bash
# Shows that `make image`'s digest depends on the commit only, not on where,
# with which caches or on which host it is built (issue 46). Builds the
# image of HEAD twice, each from a clone of its own in a directory of its
# own:
#   a. with this machine's Go build and module caches;
#   b. with a build cache, a module cache (filled from GOPROXY first), a
#      HOME and a TMPDIR of its own, and then, for the build itself, the
#      module proxy off and the host's CA certificates hidden (an empty
#      directory over /etc/ssl/certs in a private mount namespace), so that
#      no host file can reach the image unseen;
# prints both digests and fails when they differ. Uncommitted changes are
# in neither. Needs root (unshare -m) and the Go module proxy. Cold, b
# compiles vbmcd's dependencies from nothing: minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x /usr/local/go/bin/go ] && export PATH=$PATH:/usr/local/go/bin
rev=$(git rev-parse HEAD)
[ -z "$(git status --porcelain)" ] || echo "uncommitted changes are left out: both builds are of $rev"
work=$(mktemp -d)
[ -n "${KEEP:-}" ] && echo "kept: $work" || trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT
for c in a b; do
  git clone -q --no-hardlinks . "$work/$c"
  git -C "$work/$c" checkout -q "$rev"
done

echo "== a: $work/a, this machine's caches"
(cd "$work/a" && OUT="$work/out-a" bash hack/image.sh)

echo "== b: $work/b, caches of its own; the module proxy off and /etc/ssl/certs empty while it builds"
mkdir -p "$work/cache" "$work/mod" "$work/home" "$work/tmp" "$work/empty"
own=(HOME="$work/home" GOCACHE="$work/cache" GOMODCACHE="$work/mod" TMPDIR="$work/tmp" GOFLAGS=-modcacherw)
# The modules the build needs, fetched while the network and the host's
# certificates are there (the proxy is reached over HTTPS).
(cd "$work/b" && env "${own[@]}" go list -deps ./cmd/vbmcd ./hack/mkimage >/dev/null)
unshare -m bash -c "mount --bind '$work/empty' /etc/ssl/certs && cd '$work/b' &&
  env ${own[*]} GOPROXY=off OUT='$work/out-b' bash hack/image.sh"

a=$(cat "$work/out-a/digest")
b=$(cat "$work/out-b/digest")
echo "a: $a"
echo "b: $b"
if [ "$a" != "$b" ]; then
  echo "the digests differ" >&2
  exit 1
fi
echo "the same digest from both"
