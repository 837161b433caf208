#!/usr/bin/env bash
# Times `labctl up --mode agent --profile tiny --until media` for a compact
# lab (3 masters) and its `labctl down`, ROUNDS times (default 5): preflight,
# network, storage, nodes, vbmcd, install-config and agent-config, the ISO
# (the fixture installer's: a grub image, built with grub-mkrescue), and
# every node's InsertMedia, Once Cd override and On through vbmcd's Redfish.
# It does not wait for the nodes to boot. Needs root and libvirtd in the
# network namespace labci (hack/start-libvirtd.sh); the lab's network lives
# only there.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-5}
go build -o bin/ ./cmd/...
go build -o _out/tools/fake-installer/openshift-install ./internal/upi/upitest/fakeinstaller
dir=$(mktemp -d /tmp/bmlab-agent-bench-XXXX)
chmod 755 "$dir"
trap 'bin/labctl down -f "$dir/lab.yaml" --netns labci --mode agent --profile tiny >/dev/null 2>&1 || true; rm -rf "$dir"' EXIT
ssh-keygen -q -t ed25519 -N "" -f "$dir/id" >/dev/null
echo '{"auths":{"registry.invalid":{"auth":"dXNlcjpwYXNz"}}}' >"$dir/pull-secret.json"
cat >"$dir/lab.yaml" <<LAB
name: agbench
cluster:
  clusterName: bench
  baseDomain: lab.invalid
  machineNetwork: 10.198.68.0/24
  dhcpRange: {start: 10.198.68.20, end: 10.198.68.60}
  apiVIP: 10.198.68.5
  ingressVIP: 10.198.68.4
  bmc: {redfishPort: 18798, username: admin, password: bench-pass}
  sshKey: id.pub
  installer: $PWD/_out/tools/fake-installer/openshift-install
  workers: {count: 0}
  agent: {mediaPort: 18799}
LAB
args=(-f "$dir/lab.yaml" --netns labci --mode agent --profile tiny)
for i in $(seq "$rounds"); do
  s=$(date +%s.%N)
  bin/labctl up "${args[@]}" --until media >"$dir/up.log" 2>&1 || { cat "$dir/up.log"; exit 1; }
  m=$(date +%s.%N)
  bin/labctl down "${args[@]}" >"$dir/down.log" 2>&1 || { cat "$dir/down.log"; exit 1; }
  e=$(date +%s.%N)
  awk -v i="$i" -v s="$s" -v m="$m" -v e="$e" -v l="$(cut -d' ' -f1 /proc/loadavg)" \
    'BEGIN { printf "round %d: up --until media %.2f s, down %.2f s (load %s)\n", i, m - s, e - m, l }'
done
