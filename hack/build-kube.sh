#!/usr/bin/env bash
# Builds kube-apiserver (k8s.io/kubernetes v1.37.2) and etcd
# (go.etcd.io/etcd/server/v3 v3.6.16) into _out/tools/, for the KubeVirt
# backend's tests, which start both on loopback (internal/kubevirt/kubetest).
# Each is skipped when that version is already there. The tools modules
# under hack/tools/ pin the versions and keep k8s.io/kubernetes out of
# bmlab's own go.mod.
#
# Cost on a 2-core machine with an empty build cache: see docs/kubevirt.md.
set -euo pipefail
cd "$(dirname "$0")/.."
KUBE_VERSION=v1.37.2
ETCD_VERSION=v3.6.16
mkdir -p _out/tools
out=$PWD/_out/tools

build() { # dir ldflags pkg binary
  # nice: on CI the build shares 2 cores with whatever else runs.
  (cd "$1" && GOFLAGS=-mod=mod CGO_ENABLED=0 nice -n 10 go build -trimpath -ldflags "$2" -o "$out/$4.tmp" "$3")
  mv "$out/$4.tmp" "$out/$4"
}

if ! { [ -x "$out/kube-apiserver" ] && "$out/kube-apiserver" --version 2>/dev/null | grep -qx "Kubernetes $KUBE_VERSION"; }; then
  echo "building kube-apiserver $KUBE_VERSION (once)"
  # The version is stamped at link time, as kubernetes' own build does;
  # without it the server calls itself v0.0.0-master.
  v=k8s.io/component-base/version
  minor=${KUBE_VERSION#v1.}; minor=${minor%%.*}
  build hack/tools/kube "-s -w -X $v.gitVersion=$KUBE_VERSION -X $v.gitMajor=1 -X $v.gitMinor=$minor -X $v.gitTreeState=clean" \
    k8s.io/kubernetes/cmd/kube-apiserver kube-apiserver
fi

if ! { [ -x "$out/etcd" ] && "$out/etcd" --version 2>/dev/null | grep -qx "etcd Version: ${ETCD_VERSION#v}"; }; then
  echo "building etcd $ETCD_VERSION (once)"
  build hack/tools/etcd "-s -w" go.etcd.io/etcd/server/v3 etcd
fi
