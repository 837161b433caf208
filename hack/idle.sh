#!/usr/bin/env bash
# vbmcd's CPU while idle over N libvirt domains (defined, not running), with
# Redfish and IPMI on: the share of one core over SECONDS after start-up.
# Usage: bash hack/idle.sh [N] [SECONDS]   (default 200 60; root, libvirtd up)
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-200}; secs=${2:-60}
go build -o bin/ ./cmd/vbmcd
dir=$(mktemp -d)
prefix=idle-$$-
cleanup() {
  kill "$pid" 2>/dev/null || true
  for i in $(seq "$n"); do virsh -q undefine "${prefix}$i" >/dev/null 2>&1 || true; done
  rm -rf "$dir"
}
trap cleanup EXIT
for i in $(seq "$n"); do
  printf "<domain type='qemu'><name>%s%d</name><memory unit='MiB'>64</memory><vcpu>1</vcpu><os><type arch='x86_64' machine='pc'>hvm</type></os><devices/></domain>" "$prefix" "$i" >"$dir/d.xml"
  virsh -q define "$dir/d.xml" >/dev/null
done
printf 'username: admin\npassword: idle-pass-1\n' >"$dir/c.yaml"; chmod 600 "$dir/c.yaml"
bin/vbmcd --libvirt-uri qemu:///system --domains "${prefix}*" --redfish-addr 127.0.0.1:18700 --insecure-http \
  --ipmi --ipmi-port-base 42000 --credentials-file "$dir/c.yaml" --state-dir "$dir/state" --media-dir "$dir/media" \
  >"$dir/vbmcd.log" 2>&1 &
pid=$!
sleep 5 # start-up: the first read of every domain, the BMCs' sockets
cpu() { awk '{print $14+$15}' /proc/$pid/stat; }
c0=$(cpu); sleep "$secs"; c1=$(cpu)
echo "vbmcd over $n domains, idle ${secs}s: $(echo "scale=2; ($c1-$c0)/$secs" | bc)% of a core ($((c1-c0)) ticks of 10 ms), RSS $(awk '/^VmRSS/{print $2}' /proc/$pid/status) KiB, $(ls /proc/$pid/fd | wc -l) fds"
