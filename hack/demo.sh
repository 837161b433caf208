#!/usr/bin/env bash
# The demo (`make demo`): a few VMs that boot the marker ISO, each with a
# Redfish and an IPMI BMC served by one vbmcd, endpoints printed. Runs in the
# foreground; Ctrl-C stops it and removes the demo VMs. Without /dev/kvm the
# VMs run under TCG (software emulation): slower, still real.
#
#   DEMO_NODES=5 make demo     how many VMs (default 3)
#   DEMO_BACKEND=sim make demo simulated servers, no libvirt
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "$(id -u)" != 0 ]; then
  echo "make demo needs root (it installs packages and starts libvirtd): sudo make demo" >&2
  exit 1
fi
command -v go >/dev/null || { echo "Go is not on PATH: install Go 1.26 (https://go.dev/dl) and retry" >&2; exit 1; }
bash hack/install-deps.sh
go build -o bin/ ./cmd/...

if [ "${DEMO_BACKEND:-libvirt}" = sim ]; then
  exec bin/vbmcd --backend sim --sim-nodes "${DEMO_NODES:-3}" --redfish-addr 127.0.0.1:8000 \
    --ipmi-addr 127.0.0.1 --ipmi-port-base 6230 --state-dir /tmp/bmlab-demo-state
fi
bash hack/start-libvirtd.sh
mkdir -p testdata/iso
[ -f testdata/iso/marker.iso ] || bash hack/build-marker-iso.sh testdata/iso/marker.iso BMLAB-MARKER-BOOTED halt >/dev/null
exec bin/labctl demo --nodes "${DEMO_NODES:-3}" --iso testdata/iso/marker.iso
