#!/usr/bin/env bash
# Benchmarks the Redfish service over the sim backend (loopback only):
# a system GET at 8 keep-alive connections, then the 1,000-system
# collection on one connection. Extra arguments go to both runs.
set -euo pipefail
cd "$(dirname "$0")/.."
go build -o bin/rfbench ./cmd/rfbench
echo "== GET /redfish/v1/Systems/{id}, 8 connections, Basic auth"
bin/rfbench -c 8 -d "${BENCH_DURATION:-10s}" "$@"
echo "== GET /redfish/v1/Systems with 1,000 systems, 1 connection"
bin/rfbench -systems 1000 -path /redfish/v1/Systems -c 1 -d "${BENCH_DURATION:-5s}" "$@"
