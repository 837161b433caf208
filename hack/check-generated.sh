#!/usr/bin/env bash
# Regenerates the committed test data made from KubeVirt's and CDI's own
# code and fails when it differs from what is committed (a generator or a
# pinned version changed without the data, or the data was edited):
#   internal/kubevirt/testdata/kubevirt-crds.yaml          kubevirt-manifests crds
#   internal/kubevirt/testdata/kubevirt-control-plane.yaml kubevirt-manifests control-plane
#   internal/kubevirt/testdata/cdi-crds.yaml               hack/tools/cdi-crds/gen.sh
# The generators are the binaries hack/build-kube.sh keeps in the tool
# cache, so this costs seconds, not a build. With -w it writes the files
# instead of checking them.
set -euo pipefail
cd "$(dirname "$0")/.."
write=false
[ "${1:-}" = -w ] && write=true
td=internal/kubevirt/testdata
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
_out/tools/kubevirt-manifests crds >"$tmp/kubevirt-crds.yaml"
_out/tools/kubevirt-manifests control-plane >"$tmp/kubevirt-control-plane.yaml"
bash hack/tools/cdi-crds/gen.sh >"$tmp/cdi-crds.yaml"
rc=0
for f in kubevirt-crds.yaml kubevirt-control-plane.yaml cdi-crds.yaml; do
  if $write; then
    cp "$tmp/$f" "$td/$f"
  elif ! cmp -s "$tmp/$f" "$td/$f"; then
    echo "$td/$f differs from what its generator writes now (bash hack/check-generated.sh -w rewrites it):" >&2
    diff -u "$td/$f" "$tmp/$f" | head -40 >&2 || true
    rc=1
  fi
done
exit $rc
