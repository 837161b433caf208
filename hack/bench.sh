#!/usr/bin/env bash
# Benchmarks the Redfish service (loopback only):
#  1. GET /Systems/{id} at 8 keep-alive connections, sim backend;
#  2. the 1,000-system collection on one connection, sim backend;
#  3. GET /Systems/{id} at 8 connections over HTTPS with the libvirt backend
#     (three real domains served by vbmcd inside `labctl demo`), when run as
#     root with libvirtd reachable;
#  4. GET /Systems/{id} at 8 connections over HTTPS, two VMs served from one
#     libvirt host vs two (BenchmarkMultiHostGetSystem: libvirtds of their own
#     in network namespaces, reached over qemu+tcp on veths), as root;
#  5. how long after one host's libvirtd dies its VM reads as unavailable,
#     and how long after it answers again the VM is whole
#     (BenchmarkMultiHostReconnect);
#  6. the KubeVirt backend over 1,000 VirtualMachines with KubeVirt's
#     virt-api and virt-controller running, vbmcd as its ServiceAccount:
#     GET /Systems/{id}, an owner's change to a VM until a GET shows it,
#     start to serving, heap per VM (BenchmarkKubeVirtSystems), and a
#     Redfish On until PowerState On through KubeVirt's controllers
#     (BenchmarkKubeVirtPowerOn; docs/performance.md);
# and, after run 2, vbmcd's Redfish front against a bare net/http server
# answering the same bytes, alternated (hack/front-bench.sh).
# Extra arguments go to runs 1 and 2.
set -euo pipefail
cd "$(dirname "$0")/.."
go build -o bin/ ./cmd/...
echo "== GET /redfish/v1/Systems/{id}, 8 connections, Basic auth, sim backend"
bin/rfbench -c 8 -d "${BENCH_DURATION:-10s}" "$@"
echo "== GET /redfish/v1/Systems with 1,000 systems, 1 connection, sim backend"
bin/rfbench -systems 1000 -path /redfish/v1/Systems -c 1 -d "${BENCH_DURATION:-5s}" "$@"
echo "== vbmcd's Redfish front against a bare net/http server answering the same bytes, alternated pairs"
BUILD=0 bash hack/front-bench.sh

if [ "$(id -u)" != 0 ] || ! [ -S /var/run/libvirt/libvirt-sock ]; then
  echo "== libvirt backend: skipped (needs root and libvirtd; hack/start-libvirtd.sh)"
  exit 0
fi
mkdir -p testdata/iso
[ -f testdata/iso/marker.iso ] || bash hack/build-marker-iso.sh testdata/iso/marker.iso >/dev/null
out=$(mktemp)
bin/labctl demo --nodes 3 --prefix bmlab-bench- --redfish-addr 127.0.0.1:18443 --ipmi-port-base 16400 >"$out" 2>&1 &
pid=$!
trap 'kill -INT $pid 2>/dev/null; wait $pid 2>/dev/null; rm -f "$out"' EXIT
for _ in $(seq 1 100); do grep -q "vbmcd: serving" "$out" && break; sleep 0.2; done
id=$(grep -o 'Systems/[0-9a-f-]\{36\}' "$out" | head -1 | cut -d/ -f2)
echo "== GET /redfish/v1/Systems/{id}, 8 connections, Basic auth, HTTPS, libvirt backend"
bin/rfbench -url https://127.0.0.1:18443 -server-pid "$pid" -path "/redfish/v1/Systems/$id" -c 8 -d "${BENCH_DURATION:-10s}"
echo "== GET /redfish/v1/Systems/{id}, 8 connections, HTTPS, two VMs on one libvirt host vs two (Go benchmark)"
CI=true go test -count=1 -p 1 -run '^$' -bench BenchmarkMultiHostGetSystem -benchtime 100000x ./internal/vbmcd/ | grep -E '^(Benchmark|ok|FAIL)'
echo "== one host's libvirtd killed and restarted: ms to unavailable, ms to whole again (Go benchmark)"
CI=true go test -count=1 -p 1 -run '^$' -bench BenchmarkMultiHostReconnect -benchtime 10x ./internal/vbmcd/ | grep -E '^(Benchmark|ok|FAIL)'
echo "== KubeVirt backend over 1,000 VMs, KubeVirt's controllers running: GET /redfish/v1/Systems/{id} at 8 connections over HTTPS, a VM's change until a GET shows it (Go benchmark; also start to serving and heap per VM)"
bash hack/build-kube.sh
CI=true go test -count=1 -p 1 -run '^$' -bench BenchmarkKubeVirtSystems -benchtime 5s ./internal/vbmcd/ | grep -E '^(Benchmark|ok|FAIL)'
echo "== KubeVirt: a Redfish On until PowerState On, through KubeVirt's virt-api and virt-controller (Go benchmark)"
CI=true go test -count=1 -p 1 -run '^$' -bench BenchmarkKubeVirtPowerOn -benchtime 5x ./internal/vbmcd/ | grep -E '^(Benchmark|ok|FAIL)'
