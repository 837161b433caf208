#!/usr/bin/env bash
# The project's test command (`make test`): installs what the tests need,
# starts libvirtd, builds the marker images, runs make lint (go vet,
# staticcheck) and the pure-logic tests under the race detector, then every
# test, unit and integration, against the real libvirtd, qemu and clients.
#
# Under CI=true a missing prerequisite fails the test that needs it instead
# of skipping it. Extra arguments go to `go test` (e.g. -run TestE2E).
set -euo pipefail
cd "$(dirname "$0")/.."

. hack/prereq.sh
need_root_and_go "make test needs root: the integration tests make network namespaces and talk to the system libvirtd (run it as root, or: sudo make test)"

# Each phase's start, with the seconds since the run began (CI's log shows
# where its time goes).
began=$SECONDS
phase() { echo "== $1 (at $((SECONDS - began)) s)"; }

phase "install and start"
bash hack/install-deps.sh
bash hack/start-libvirtd.sh
mkdir -p testdata/iso
[ -f testdata/iso/marker.iso ] || bash hack/build-marker-iso.sh testdata/iso/marker.iso BMLAB-MARKER-BOOTED halt >/dev/null
[ -f testdata/iso/disk-marker.img ] || bash hack/build-marker-iso.sh testdata/iso/disk-marker.img BMLAB-DISK-BOOTED stay >/dev/null
[ -f testdata/iso/marker.efi ] || bash hack/build-marker-efi.sh testdata/iso/marker.efi BMLAB-EFI-BOOTED halt >/dev/null
[ -f testdata/iso/os-disk.img ] || bash hack/build-os-image.sh testdata/iso/os-disk.img BMLAB-OS-BOOTED >/dev/null

phase "tools"
# Tools built from Go modules, once per machine and version, into a cache
# outside the clone (hack/toolcache.sh): a second run builds nothing.
bash hack/build-coredns.sh
bash hack/build-kube.sh
# Debian 13 (trixie) trees, the same way: the deploy ramdisk (the real
# ironic-python-agent) and Ironic 29's root.
bash hack/build-ipa-ramdisk.sh
bash hack/build-ironic-root.sh
# The text-UI image the hands-free console's tests boot (a Debian kernel,
# busybox and whiptail), built the same way, once per machine.
bash hack/build-tui-image.sh
# The committed KubeVirt and CDI test data must be what their generators
# (KubeVirt's and CDI's own code, just built) make now.
bash hack/check-generated.sh

go build ./...
# make lint (go vet, staticcheck), then the pure-logic tests under the race
# detector (make unit), then every test. With arguments (one test, say) only
# that last run, after go vet.
if [ $# -eq 0 ]; then
  phase "lint"
  bash hack/lint.sh
  phase "unit tests under the race detector"
  go test -short -race -count=1 ./...
else
  go vet ./...
fi
# One package at a time: the VM tests boot qemu under TCG and time real
# protocol exchanges; on a 2-core machine, packages in parallel starve each
# other. -timeout is per package: internal/vbmcd alone took 1,408 s (23.5
# min) in a warm CI run on a 2-core machine, so 45 min leaves a slower
# machine its margin while a hung test still ends the run.
# -parallel 4: a test's parallel subtests run up to four at once (go
# test's default is GOMAXPROCS, 2 here): TestUpBMCNetwork's four labs took
# 293 s at once, 374 s two at a time, 550 s one after another
# (docs/tests.md).
# The run goes through hack/testtimes, which prints what plain go test would
# and then the slowest tests, so every CI log says where its minutes went
# (every test's time: _out/test-times.txt).
phase "every test"
mkdir -p _out
go build -o _out/testtimes ./hack/testtimes
go test -p 1 -parallel 4 -count=1 -timeout 45m -json "$@" ./... | _out/testtimes -top 25 -out _out/test-times.txt
