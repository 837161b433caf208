#!/usr/bin/env bash
# Builds coredns from its Go module at a pinned version, once per machine,
# into the tool cache (hack/toolcache.sh), linked into _out/tools/, for the
# tests that run the hybrid mode's generated Corefile in the real daemon.
# About 2 minutes on a 2-core machine with an empty module cache.
set -euo pipefail
cd "$(dirname "$0")/.."
. hack/toolcache.sh
tool_go_install coredns v1.15.0 github.com/coredns/coredns
