#!/usr/bin/env bash
# Starts virtlogd and libvirtd when they are not running (there is no systemd
# here). libvirtd runs inside the network namespace "labci" so every bridge,
# tap and dnsmasq it creates stays inside that namespace; clients reach it
# through its unix socket as usual. Idempotent.
#
# Both daemons run in the foreground under `tini -s`, a subreaper: libvirt
# daemonizes qemu (capability probes, domains), and where PID 1 does not reap
# orphans (containers, micro-VMs) those would stay zombies that libvirtd
# waits on forever, hanging every define.
set -euo pipefail

NS=${LAB_NETNS:-labci}
SOCK=/var/run/libvirt/libvirt-sock
LOG=/var/log/libvirt

if ! ip netns list | grep -qw "$NS"; then
  ip netns add "$NS"
fi
ip -n "$NS" link set lo up

# running NAME: a live (not zombie) process of that name exists.
running() {
  local pid
  for pid in $(pgrep -x "$1"); do
    [ "$(ps -o stat= -p "$pid" | cut -c1)" != Z ] && return 0
  done
  return 1
}

# Without udev, /dev/kvm keeps the kernel's root-only mode. libvirt probes
# qemu with KVM, then finds /dev/kvm unusable by the qemu user, declares its
# capability cache outdated and probes again on every define (~20 s each).
# Give it udev's usual group and mode.
if [ -c /dev/kvm ] && getent group kvm >/dev/null; then
  chgrp kvm /dev/kvm && chmod 0660 /dev/kvm
fi

mkdir -p /var/run/libvirt "$LOG"
if ! running virtlogd; then
  setsid tini -s -- virtlogd </dev/null >>"$LOG/virtlogd.out" 2>&1 &
fi
if ! running libvirtd; then
  setsid ip netns exec "$NS" tini -s -- libvirtd </dev/null >>"$LOG/libvirtd.out" 2>&1 &
fi
for _ in $(seq 1 150); do
  if [ -S "$SOCK" ] && timeout 5 virsh -c qemu:///system version >/dev/null 2>&1; then
    echo "libvirtd is up (netns $NS)"
    exit 0
  fi
  sleep 0.2
done
echo "libvirtd did not come up; see $LOG/libvirtd.log and $LOG/libvirtd.out" >&2
exit 1
