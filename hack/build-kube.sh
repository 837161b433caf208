#!/usr/bin/env bash
# Builds the control plane the KubeVirt backend's tests run on loopback
# (internal/kubevirt/kubetest, kubevirttest), once per machine and version,
# into the tool cache (hack/toolcache.sh), linked into _out/tools/:
#   - kube-apiserver (k8s.io/kubernetes v1.37.2) and etcd
#     (go.etcd.io/etcd/server/v3 v3.6.16), through the tools modules
#     hack/tools/kube and hack/tools/etcd;
#   - virt-api and virt-controller from kubevirt.io/kubevirt v1.8.0, and
#     kubevirt-manifests (the CRDs, RBAC, webhook configurations and
#     APIService virt-operator makes), through hack/tools/kubevirt, which
#     restates KubeVirt's own replace lines and go.sum;
#   - controller-gen (sigs.k8s.io/controller-tools v0.19.0), which writes
#     CDI's DataVolume CRD (hack/tools/cdi-crds).
# The tools modules keep all of this out of bmlab's own go.mod.
#
# Cost on a 2-core machine, cold (about 11 min) and warm (links only): see
# docs/performance.md (KubeVirt).
set -euo pipefail
cd "$(dirname "$0")/.."
. hack/toolcache.sh
KUBE_VERSION=v1.37.2
ETCD_VERSION=v3.6.16
KUBEVIRT_VERSION=v1.8.0
CONTROLLER_GEN_VERSION=v0.19.0

# The pinned versions are the tools modules' own; a mismatch is a script
# out of date, not something to build.
pinned() { # module-dir module version
  local got
  got=$(sed -n "s#^[[:space:]]*\(require \)\?$2 \(v[^ ]*\).*#\2#p" "$1/go.mod" | head -1)
  [ "$got" = "$3" ] || { echo "$1/go.mod requires $2 $got, this script builds $3" >&2; exit 1; }
}
pinned hack/tools/kube k8s.io/kubernetes $KUBE_VERSION
pinned hack/tools/etcd go.etcd.io/etcd/server/v3 $ETCD_VERSION
pinned hack/tools/kubevirt kubevirt.io/kubevirt $KUBEVIRT_VERSION
pinned hack/tools/cdi-crds sigs.k8s.io/controller-tools $CONTROLLER_GEN_VERSION

build_kube_apiserver() {
  # The version is stamped at link time, as kubernetes' own build does;
  # without it the server calls itself v0.0.0-master.
  local v=k8s.io/component-base/version minor=${KUBE_VERSION#v1.}
  minor=${minor%%.*}
  go_build "$1" hack/tools/kube "-s -w -X $v.gitVersion=$KUBE_VERSION -X $v.gitMajor=1 -X $v.gitMinor=$minor -X $v.gitTreeState=clean" \
    k8s.io/kubernetes/cmd/kube-apiserver
}

build_etcd() {
  go_build "$1" hack/tools/etcd "-s -w" go.etcd.io/etcd/server/v3
  mv "$1/server" "$1/etcd"
}

build_kubevirt() {
  # One go build for the three: they share most of their packages.
  local v=kubevirt.io/client-go/version
  go_build "$1" hack/tools/kubevirt "-s -w -X $v.gitVersion=$KUBEVIRT_VERSION -X $v.gitTreeState=clean" \
    kubevirt.io/kubevirt/cmd/virt-api kubevirt.io/kubevirt/cmd/virt-controller ./manifests
  mv "$1/manifests" "$1/kubevirt-manifests"
}

build_controller_gen() {
  go_build "$1" hack/tools/cdi-crds "-s -w" sigs.k8s.io/controller-tools/cmd/controller-gen
}

tool_cached kube-apiserver "$KUBE_VERSION-$(modhash hack/tools/kube)" build_kube_apiserver
tool_cached etcd "$ETCD_VERSION-$(modhash hack/tools/etcd)" build_etcd
tool_cached kubevirt "$KUBEVIRT_VERSION-$(modhash hack/tools/kubevirt)" build_kubevirt
tool_cached controller-gen "$CONTROLLER_GEN_VERSION-$(modhash hack/tools/cdi-crds)" build_controller_gen
