#!/usr/bin/env bash
# The demo (`make demo`): `labctl up --profile tiny` for a small OpenShift
# IPI bare-metal lab (3 masters, 2 workers), up to install-config.yaml:
# network (the lab's NAT network with DHCP reservations and DNS, the
# baremetal bridge and its veth), storage, UEFI nodes, one vbmcd giving each a
# Redfish (virtual media) BMC, and the install-config. It prints the nodes
# and their BMC endpoints, then leaves the lab up; `make demo-down` removes it.
#
# libvirtd runs in the network namespace labci (hack/start-libvirtd.sh), so
# everything with an address stays in there. Without KVM the VMs use TCG.
set -euo pipefail
cd "$(dirname "$0")/.."

. hack/prereq.sh
need_root_and_go "make demo needs root (it installs packages, starts libvirtd, makes bridges): run it as root, or: sudo make demo"
bash hack/install-deps.sh
bash hack/start-libvirtd.sh
go build -o bin/ ./cmd/...

dir=$PWD/_out/demo
mkdir -p "$dir"
chmod 755 "$PWD/_out" "$dir"
if [ ! -f "$dir/lab.yaml" ]; then
  cat >"$dir/lab.yaml" <<LAB
apiVersion: bmlab.dev/v1alpha1
kind: Lab
name: demo
cluster:
  clusterName: ocp
  baseDomain: demo.invalid
  machineNetwork: 10.198.50.0/24
  dhcpRange: {start: 10.198.50.20, end: 10.198.50.60}
  apiVIP: 10.198.50.5
  ingressVIP: 10.198.50.4
  sshKey: id_demo.pub
LAB
  # Placeholders: enough for install-config; put your real pull secret here
  # (and your own key) before running the installer.
  echo '{"auths":{"registry.invalid":{"auth":"cGxhY2Vob2xkZXI6cGxhY2Vob2xkZXI="}}}' >"$dir/pull-secret.json"
  ssh-keygen -q -t ed25519 -N '' -C bmlab-demo -f "$dir/id_demo"
fi
run() { bin/labctl "$@" -f "$dir/lab.yaml" --netns labci; }
run up --profile tiny --until install-config
uuid=$(run status --profile tiny -o json | sed -n 's/.*"uuid": "\(.*\)".*/\1/p' | head -1)
cat <<MSG

The lab is up (install-config: $dir/install/install-config.yaml). Its
network, and vbmcd with it, live in the namespace labci. Try:
  ip netns exec labci curl -sk -u admin:password https://10.198.50.1:8000/redfish/v1/Systems/$uuid | python3 -m json.tool
  ip netns exec labci curl -sk -u admin:password https://10.198.50.1:8000/redfish/v1/Managers/$uuid/VirtualMedia/Cd
Remove it with: make demo-down
MSG
