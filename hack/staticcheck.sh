#!/usr/bin/env bash
# Runs staticcheck over the module. The binary is built from its Go module
# at a pinned version, once per machine, into the tool cache
# (hack/toolcache.sh), linked into _out/tools/.
set -euo pipefail
cd "$(dirname "$0")/.."
. hack/toolcache.sh
VERSION=v0.8.2
build_staticcheck() {
  GOBIN="$1" GOFLAGS=-mod=mod nice -n 10 go install "honnef.co/go/tools/cmd/staticcheck@$VERSION"
}
tool_cached staticcheck $VERSION build_staticcheck >&2
exec _out/tools/staticcheck "$@" ./...
