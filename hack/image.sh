#!/usr/bin/env bash
# make image: vbmcd's OCI image, built without a container daemon
# (internal/ociimage, go-containerregistry): a static vbmcd
# (CGO_ENABLED=0; its libvirt client is pure Go), a non-root user, no shell.
# Reproducible: the same tree gives the same digest (every timestamp is the
# last commit's, or SOURCE_DATE_EPOCH; entries sorted; the binary built with
# -trimpath and no build ID); no file of the build host goes in (vbmcd
# carries its CA roots, cmd/vbmcd/roots.go). hack/image-repro.sh builds it
# from a second clone with caches of its own and compares.
#
# Writes OUT (default _out/image): vbmcd (the binary), oci/ (an OCI image
# layout), vbmcd-oci.tar (the same as an OCI archive: podman load -i
# vbmcd-oci.tar), digest. Prints "REF DIGEST ARCHIVE".
# Environment: OUT, REF (default bmlab/vbmcd:dev), GOARCH, SOURCE_DATE_EPOCH.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x /usr/local/go/bin/go ] && export PATH=$PATH:/usr/local/go/bin

out=${OUT:-_out/image}
ref=${REF:-bmlab/vbmcd:dev}
arch=${GOARCH:-$(go env GOARCH)}
epoch=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || echo 0)}
version=$(git describe --always --dirty 2>/dev/null || echo dev)

mkdir -p "$out"
# The builder's own Go settings must not reach the binary: GOFLAGS from a
# go env file (-buildvcs=false here, and without it the go command stamps
# the checkout's VCS state), the instruction set levels.
GOFLAGS=-buildvcs=false GOAMD64=v1 GOARM64=v8.0 CGO_ENABLED=0 GOOS=linux GOARCH="$arch" \
  go build -trimpath -ldflags "-s -w -buildid=" -o "$out/vbmcd" ./cmd/vbmcd
go run ./hack/mkimage -binary "$out/vbmcd" -arch "$arch" -version "$version" \
  -created "$epoch" -out "$out" -ref "$ref"
