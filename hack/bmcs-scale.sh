#!/usr/bin/env bash
# One BMC per address at scale (vbmcd --bmc-addresses), sim backend, HTTPS,
# IPMI on: vbmcd over N simulated servers (default 1,000) started twice,
# once with the single listener only and once with a Redfish listener and
# an IPMI BMC of its own for every server on 127.35.x.y (loopback has all
# of 127.0.0.0/8). For each: how long from exec until the last address
# answers, RSS idle, and GET /Systems/{id} at 8 connections on the service
# listener and, with BMCs, on one machine's own listener, in one run; then
# every BMC once (its certificate issued at its first handshake).
# Needs root (ports 443 and 623).
# Usage: bash hack/bmcs-scale.sh [N] [DURATION]
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-1000}; d=${2:-10s}
((n >= 1 && n <= 65000)) || { echo "N: 1 to 65000" >&2; exit 2; }
go build -o bin/ ./cmd/vbmcd ./cmd/rfbench
dir=$(mktemp -d)
pid=
trap 'kill "$pid" 2>/dev/null || true; wait 2>/dev/null; rm -rf "$dir"' EXIT
printf 'username: admin\npassword: scale-pass-1\n' >"$dir/c.yaml"; chmod 600 "$dir/c.yaml"
# The n-th address from 127.35.0.1 on (a range is contiguous: .255 and .0
# of the next block are in it).
addr() { local k=$1; echo "127.35.$((k / 256)).$((k % 256))"; }
last=$(addr "$n")
rss() { awk '/^VmRSS/{printf "%.1f MB", $2/1024}' "/proc/$pid/status"; }
fds() { ls "/proc/$pid/fd" | wc -l; }

run() { # mode: single | bmcs
  local mode=$1 extra=()
  [ "$mode" = bmcs ] && extra=(--bmc-addresses "127.35.0.1-$last")
  rm -rf "$dir/state" "$dir/media"
  local t0 t1
  t0=$(date +%s%N)
  bin/vbmcd --backend sim --sim-nodes "$n" --redfish-addr 127.0.0.1:18801 \
    --credentials-file "$dir/c.yaml" --state-dir "$dir/state" --media-dir "$dir/media" \
    --ipmi-port-base "$([ "$mode" = single ] && echo 17000 || echo 0)" "${extra[@]}" >"$dir/log" 2>&1 &
  pid=$!
  local probe=https://127.0.0.1:18801/redfish/v1/Systems?\$top=1
  [ "$mode" = bmcs ] && probe=https://$last/redfish/v1/Systems
  until curl -fsk -o /dev/null -u admin:scale-pass-1 "$probe"; do
    kill -0 "$pid" 2>/dev/null || { cat "$dir/log"; exit 1; }
    sleep 0.01
  done
  t1=$(date +%s%N)
  sleep 2
  echo "== $mode: $n sim servers, answering at $probe $(( (t1 - t0) / 1000000 )) ms after exec; RSS idle $(rss), $(fds) fds"
  local id
  id=$(curl -fsk -u admin:scale-pass-1 "https://127.0.0.1:18801/redfish/v1/Systems?\$top=1" | grep -o '/redfish/v1/Systems/[0-9a-f-]\{36\}' | head -1)
  echo "   GET $id on the service listener, 8 connections:"
  bin/rfbench -url https://127.0.0.1:18801 -server-pid "$pid" -user admin -password scale-pass-1 -path "$id" -c 8 -d "$d" | grep -E 'throughput|latency|server CPU' | sed 's/^/     /'
  if [ "$mode" = bmcs ]; then
    echo "   GET $id on its own BMC, https://127.35.0.1, 8 connections:"
    bin/rfbench -url https://127.35.0.1 -server-pid "$pid" -user admin -password scale-pass-1 -path "$id" -c 8 -d "$d" | grep -E 'throughput|latency|server CPU' | sed 's/^/     /'
    echo "   members of /redfish/v1/Systems at https://$last: $(curl -fsk -u admin:scale-pass-1 "https://$last/redfish/v1/Systems" | grep -o '"Members@odata.count":[0-9]*' | cut -d: -f2)"
    # Every BMC once (a TLS handshake each, so a certificate issued for
    # each address), one curl: what a client that polls every node costs.
    for ((k = 1; k <= n; k++)); do
      printf 'url = "https://%s/redfish/v1/Systems"\noutput = "/dev/null"\n' "$(addr "$k")"
    done >"$dir/all"
    local ts te
    ts=$(date +%s%N)
    curl -fsk -u admin:scale-pass-1 -K "$dir/all"
    te=$(date +%s%N)
    echo "   GET /redfish/v1/Systems at each of the $n BMCs once, one curl, a new TLS connection each: $(( (te - ts) / 1000000 )) ms; RSS after $(rss)"
  fi
  echo "   RSS after load $(rss)"
  kill "$pid"; wait "$pid" 2>/dev/null || true; pid=
}
run single
run bmcs
