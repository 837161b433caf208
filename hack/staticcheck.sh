#!/usr/bin/env bash
# Runs staticcheck over the module. The binary is built from its Go module
# at a pinned version, once per machine, into the tool cache
# (hack/toolcache.sh), linked into _out/tools/.
set -euo pipefail
cd "$(dirname "$0")/.."
. hack/toolcache.sh
tool_go_install staticcheck v0.8.2 honnef.co/go/tools/cmd/staticcheck >&2
exec _out/tools/staticcheck "$@" ./...
