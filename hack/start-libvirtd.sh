#!/usr/bin/env bash
# Starts virtlogd and libvirtd when they are not running (there is no systemd
# here). libvirtd runs inside the network namespace "labci" so every bridge,
# tap and dnsmasq it creates stays inside that namespace; clients reach it
# through its unix socket as usual. Idempotent.
set -euo pipefail

NS=${LAB_NETNS:-labci}
SOCK=/var/run/libvirt/libvirt-sock

if ! ip netns list | grep -qw "$NS"; then
  ip netns add "$NS"
fi
ip -n "$NS" link set lo up

mkdir -p /var/run/libvirt /var/log/libvirt
if ! pgrep -x virtlogd >/dev/null; then
  virtlogd -d
fi
if ! pgrep -x libvirtd >/dev/null; then
  ip netns exec "$NS" libvirtd -d
fi
for _ in $(seq 1 100); do
  if [ -S "$SOCK" ] && virsh -c qemu:///system version >/dev/null 2>&1; then
    echo "libvirtd is up (netns $NS)"
    exit 0
  fi
  sleep 0.1
done
echo "libvirtd did not come up; see /var/log/libvirt" >&2
exit 1
