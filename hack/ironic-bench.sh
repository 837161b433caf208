#!/usr/bin/env bash
# Nodes per minute through a real Ironic: Debian's Ironic 21.4 (sqlite, no
# auth, one process) takes N simulated servers from a sushy-tools
# fake-driver systems list served by vbmcd (its own process, plain HTTP,
# --sim-media probe) through enroll, manage, inspect, provide, deploy and
# undeploy, with the stand-in agent booted by vbmcd's fake-driver
# announcements as Metal3's fake-ipa is (BenchmarkIronicNodes in
# internal/vbmcd says how). For each N it prints a Markdown table: seconds
# and nodes per minute per phase, CPU seconds of vbmcd, Ironic and the
# benchmark process (agent, listener, client), then peak RSS and the load.
# Needs root and Debian's ironic-api, ironic-conductor and python3-sushy
# (hack/install-deps.sh). The agent heartbeats every HEARTBEAT (default
# 10s) besides after each command; INFLIGHT (default 1) API calls at once.
# Usage: bash hack/ironic-bench.sh [N...]   (default: 100 500)
set -euo pipefail
cd "$(dirname "$0")/.."
ns=("$@"); [ ${#ns[@]} -gt 0 ] || ns=(100 500)
echo "machine: $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')), $(free -g | awk '/^Mem/{print $2}') GiB; $(date -u +%FT%TZ)"
for n in "${ns[@]}"; do
  log=$(mktemp /tmp/ironic-bench-$n.XXXX.log)
  echo "N=$n: the output goes to $log (each phase's row, and the load average after it, as it ends)"
  if ! BMLAB_IRONIC_NODES=$n BMLAB_IRONIC_INFLIGHT=${INFLIGHT:-1} BMLAB_IRONIC_HEARTBEAT=${HEARTBEAT:-10s} CI=true \
    go test -count=1 -timeout 4h -run '^$' -bench IronicNodes -benchtime 1x -v ./internal/vbmcd >"$log" 2>&1; then
    grep -v '^\s*20[0-9][0-9]-' "$log" | tail -40
    echo "N=$n failed; the whole output: $log" >&2
    exit 1
  fi
  grep -E '^\s+(\||peak RSS)|nodes\): ' "$log" | sed 's/^\s*//'
  rm -f "$log"
done
