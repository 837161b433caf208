#!/usr/bin/env bash
# Builds coredns from its Go module at a pinned version into _out/tools/,
# for the tests that run the hybrid mode's generated Corefile in the real
# daemon. Skipped when that version is already there. About 2 minutes on a
# 2-core machine with an empty module cache.
set -euo pipefail
cd "$(dirname "$0")/.."
VERSION=v1.15.0
out=_out/tools/coredns
if [ -x "$out" ] && "$out" -version 2>/dev/null | grep -q "CoreDNS-${VERSION#v}"; then
  exit 0
fi
mkdir -p _out/tools
echo "building coredns $VERSION (once)"
GOBIN="$PWD/_out/tools" GOFLAGS=-mod=mod go install "github.com/coredns/coredns@$VERSION"
