#!/usr/bin/env bash
# Runs staticcheck over the module. The binary is built once from its Go
# module at a pinned version into _out/tools/ and reused while that version
# is there.
set -euo pipefail
cd "$(dirname "$0")/.."
VERSION=v0.8.2
out=_out/tools/staticcheck
if ! { [ -x "$out" ] && "$out" -version 2>/dev/null | grep -q "(${VERSION#v})"; }; then
  mkdir -p _out/tools
  echo "building staticcheck $VERSION (once)"
  GOBIN="$PWD/_out/tools" GOFLAGS=-mod=mod go install "honnef.co/go/tools/cmd/staticcheck@$VERSION"
fi
exec "$out" "$@" ./...
