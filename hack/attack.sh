#!/usr/bin/env bash
# Issue 15's hostile-request figures: for each kind of attack, a fresh
# vbmcd over the sim backend on loopback gets 1,000 ordinary GETs (its idle
# footprint), then -n hostile requests of that kind from rfbench -attack,
# which reports the statuses and the daemon's VmRSS before and after.
# Usage: bash hack/attack.sh [N]   (default 10000)
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-10000}
go build -o bin/ ./cmd/vbmcd ./cmd/rfbench
dir=$(mktemp -d)
trap 'kill $pid 2>/dev/null; rm -rf "$dir"' EXIT
printf 'username: admin\npassword: attack-pass\n' >"$dir/creds.yaml"
chmod 600 "$dir/creds.yaml"
port=18123
for kind in padded-basic bad-basic bad-session sessions big-body long-path; do
  rm -rf "$dir/state" "$dir/media"
  bin/vbmcd --backend sim --sim-nodes 10 --redfish-addr 127.0.0.1:$port --insecure-http --ipmi=false \
    --credentials-file "$dir/creds.yaml" --state-dir "$dir/state" --media-dir "$dir/media" >"$dir/vbmcd.log" 2>&1 &
  pid=$!
  for _ in $(seq 50); do curl -fs -o /dev/null http://127.0.0.1:$port/redfish/v1/ && break; sleep 0.1; done
  bin/rfbench -url http://127.0.0.1:$port -server-pid $pid -user admin -password attack-pass -d 1s -warmup 0 -c 2 >/dev/null
  bin/rfbench -url http://127.0.0.1:$port -server-pid $pid -user admin -password attack-pass -attack "$kind" -n "$n" -c 8
  echo
  kill $pid; wait $pid 2>/dev/null || true
done
