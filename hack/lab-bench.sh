#!/usr/bin/env bash
# Times `labctl up` and `labctl down` of a tiny lab, ROUNDS times (default
# 5), in one mode:
#   ipi     up --until install-config: 5 nodes (3 masters, 2 workers),
#           network, disks, domains, vbmcd and install-config (make demo's);
#   hybrid  up --until control-plane: the bootstrap and 3 masters defined and
#           started from thin clones, their ignition merged (fixture
#           installer, image: the disk marker as qcow2);
#   agent   up --until media: 3 masters, the ISO (fixture installer: a grub
#           image), and every node's InsertMedia, Once Cd and On through
#           vbmcd's Redfish. It does not wait for the nodes to boot.
# SHOW_STEPS=1 prints each step's line and time. SHARED=1 puts the lab on a
# shared libvirt network (network.shared) that the script defines first,
# labbench-shared (10.198.69.0/24 on bridge bmbenchsh, NAT, dynamic range
# .200-.250), instead of a NAT network of its own: up adds the lab's
# reservations and records to it, down removes them. Needs root and libvirtd
# in the network namespace labci
# (hack/start-libvirtd.sh); the lab's network lives only there.
#
# usage: lab-bench.sh ipi|hybrid|agent [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:?usage: lab-bench.sh ipi|hybrid|agent [ROUNDS]}
rounds=${2:-5}
go build -o bin/ ./cmd/...
go build -o _out/tools/fake-installer/openshift-install ./internal/installertest/fakeinstaller
dir=$(mktemp -d /tmp/bmlab-lab-bench-XXXX)
chmod 755 "$dir"
args=(-f "$dir/lab.yaml" --netns labci --profile tiny)
net=10.198.68
netblock=""
if [ -n "${SHARED:-}" ]; then
  net=10.198.69
  cat >"$dir/shared.xml" <<NET
<network><name>labbench-shared</name><forward mode="nat"/><bridge name="bmbenchsh" stp="on" delay="0"/>
<ip address="$net.1" prefix="24"><dhcp><range start="$net.200" end="$net.250"/></dhcp></ip></network>
NET
  virsh -q -c qemu:///system net-define "$dir/shared.xml" >/dev/null
  virsh -q -c qemu:///system net-start labbench-shared >/dev/null
  netblock="network:
  shared: labbench-shared
  libvirtBridge: bmbenchsh
  bridges: [{name: bm-bench}]
  veths: [{name: bench-v0, master: bm-bench, peer: bench-v1, peerMaster: bmbenchsh}]"
fi
cleanup() {
  bin/labctl down "${args[@]}" >/dev/null 2>&1 || true
  if [ -n "${SHARED:-}" ]; then
    virsh -q -c qemu:///system net-destroy labbench-shared >/dev/null 2>&1 || true
    virsh -q -c qemu:///system net-undefine labbench-shared >/dev/null 2>&1 || true
  fi
  rm -rf "$dir"
}
trap cleanup EXIT
ssh-keygen -q -t ed25519 -N "" -f "$dir/id" >/dev/null
echo '{"auths":{"registry.invalid":{"auth":"dXNlcjpwYXNz"}}}' >"$dir/pull-secret.json"
extra=""
case "$mode" in
  ipi) until=install-config; args+=(--mode ipi-baremetal) ;;
  hybrid)
    until=control-plane; args+=(--mode hybrid)
    [ -f testdata/iso/disk-marker.img ] || bash hack/build-marker-iso.sh testdata/iso/disk-marker.img BMLAB-DISK-BOOTED stay >/dev/null
    qemu-img convert -O qcow2 testdata/iso/disk-marker.img "$dir/rhcos.qcow2"
    printf '127.0.0.1 localhost\n' >"$dir/hosts"
    extra="  image: rhcos.qcow2
  hybrid: {hostsFile: $dir/hosts}
  workers: {count: 0}" ;;
  agent) until=media; args+=(--mode agent); extra="  workers: {count: 0}
  agent: {mediaPort: 18799}" ;;
  *) echo "mode $mode: want ipi, hybrid or agent" >&2; exit 2 ;;
esac
cat >"$dir/lab.yaml" <<LAB
name: labbench
cluster:
  clusterName: bench
  baseDomain: lab.invalid
  machineNetwork: $net.0/24
  dhcpRange: {start: $net.20, end: $net.60}
  apiVIP: $net.5
  ingressVIP: $net.4
  bmc: {redfishPort: 18798, username: admin, password: bench-pass}
  sshKey: id.pub
  installer: $PWD/_out/tools/fake-installer/openshift-install
$extra
$netblock
LAB
echo "== $mode${SHARED:+ (shared network)}: labctl up --until $until, then down; $rounds rounds; $(nproc) CPUs"
for i in $(seq "$rounds"); do
  s=$(date +%s.%N)
  bin/labctl up "${args[@]}" --until "$until" >"$dir/up.log" 2>&1 || { cat "$dir/up.log"; exit 1; }
  [ -n "${SHOW_STEPS:-}" ] && grep -E "✓|✗" "$dir/up.log"
  m=$(date +%s.%N)
  bin/labctl down "${args[@]}" >"$dir/down.log" 2>&1 || { cat "$dir/down.log"; exit 1; }
  e=$(date +%s.%N)
  awk -v i="$i" -v s="$s" -v m="$m" -v e="$e" -v l="$(cut -d' ' -f1 /proc/loadavg)" \
    'BEGIN { printf "round %d: up %.2f s, down %.2f s (load %s)\n", i, m - s, e - m, l }'
done
