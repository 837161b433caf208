#!/usr/bin/env bash
# Hostile-request figures (issues 15 and 25): for each kind of attack, a
# fresh vbmcd over the sim backend on loopback gets 1,000 ordinary GETs
# (its idle footprint), then hostile requests of that kind from rfbench
# -attack, which reports the statuses and the daemon's VmRSS before and
# after; the script then reads VmRSS again 10 s later.
# Usage: bash hack/attack.sh [N] [M]
#   N requests of each small kind (default 10000), M of each kind whose
#   bodies are 1 MB or so (unknown-keys-login, unknown-keys-patch,
#   long-value; default 1000); half-open opens 5,000 connections.
#   ATTACK_KINDS="unknown-keys-login half-open" runs only those.
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-10000}
m=${2:-1000}
kinds=${ATTACK_KINDS:-padded-basic bad-basic bad-session sessions big-body long-path unknown-keys-login unknown-keys-patch long-value half-open}
go build -o bin/ ./cmd/vbmcd ./cmd/rfbench
dir=$(mktemp -d)
trap 'kill $pid 2>/dev/null; rm -rf "$dir"' EXIT
printf 'username: admin\npassword: attack-pass\n' >"$dir/creds.yaml"
chmod 600 "$dir/creds.yaml"
port=18123
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
for kind in $kinds; do
  case $kind in
  unknown-keys-*|long-value) count=$m ;;
  half-open) count=5000 ;;
  *) count=$n ;;
  esac
  rm -rf "$dir/state" "$dir/media"
  bin/vbmcd --backend sim --sim-nodes 10 --redfish-addr 127.0.0.1:$port --insecure-http --ipmi=false \
    --credentials-file "$dir/creds.yaml" --state-dir "$dir/state" --media-dir "$dir/media" >"$dir/vbmcd.log" 2>&1 &
  pid=$!
  for _ in $(seq 50); do curl -fs -o /dev/null http://127.0.0.1:$port/redfish/v1/ && break; sleep 0.1; done
  bin/rfbench -url http://127.0.0.1:$port -server-pid $pid -user admin -password attack-pass -d 1s -warmup 0 -c 2 >/dev/null
  bin/rfbench -url http://127.0.0.1:$port -server-pid $pid -user admin -password attack-pass -attack "$kind" -n "$count" -c 8
  sleep 10
  echo "server VmRSS 10 s later: $(awk '/^VmRSS/ {printf "%.1f MB", $2 * 1024 / 1e6}' /proc/$pid/status)"
  echo
  kill $pid; wait $pid 2>/dev/null || true
done
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
