#!/usr/bin/env bash
# vbmcd over N simulated servers (default 100,000), on loopback: how long it
# takes to answer, its memory idle and after load, the first page of the
# Systems collection, GET /Systems/{id} at 64 connections, flat out and at
# RATE requests a second (default 20,000; the load tool shares the CPUs),
# each next to the same load on a bare net/http server (this machine's
# floor), and an inventory pass that reads every system once (memory stays
# bounded).
# Usage: bash hack/scale.sh [N] [RATE]
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-100000}; rate=${2:-20000}
go build -o bin/ ./cmd/vbmcd ./cmd/rfbench
dir=$(mktemp -d)
trap 'kill "$pid" 2>/dev/null || true; rm -rf "$dir"' EXIT
printf 'username: admin\npassword: scale-pass-1\n' >"$dir/c.yaml"; chmod 600 "$dir/c.yaml"
t0=$(date +%s%N)
bin/vbmcd --backend sim --sim-nodes "$n" --redfish-addr 127.0.0.1:18800 --insecure-http --ipmi=false \
  --credentials-file "$dir/c.yaml" --state-dir "$dir/state" --media-dir "$dir/media" >"$dir/log" 2>&1 &
pid=$!
until curl -fs -o /dev/null -u admin:scale-pass-1 http://127.0.0.1:18800/redfish/v1/Systems?\$top=1; do sleep 0.01; done
t1=$(date +%s%N)
rss() { awk '/^VmRSS/{printf "%.0f MB", $2/1024}' /proc/$pid/status; }
sleep 2
echo "vbmcd over $n sim servers: answering $(( (t1-t0)/1000000 )) ms after exec, RSS idle $(rss)"
page=$(curl -fs -u admin:scale-pass-1 http://127.0.0.1:18800/redfish/v1/Systems)
echo "GET /Systems: $(printf %s "$page" | wc -c) bytes, $(printf %s "$page" | grep -o '"@odata.id":"/redfish/v1/Systems/[^"]*"' | wc -l) members on the page, Members@odata.count $(printf %s "$page" | grep -o '"Members@odata.count":[0-9]*' | cut -d: -f2), nextLink $(printf %s "$page" | grep -o '"Members@odata.nextLink":"[^"]*"' | cut -d'"' -f4)"
id=$(printf %s "$page" | grep -o '/redfish/v1/Systems/[0-9a-f-]\{36\}' | tail -1)
# The floor: a bare Go net/http server answering every GET with as many
# bytes, under the same load, right after: what this machine and the load
# tool allow, whatever vbmcd does.
size=$(curl -fs -u admin:scale-pass-1 "http://127.0.0.1:18800$id" | wc -c)
echo "== GET $id, 64 connections, flat out"
bin/rfbench -url http://127.0.0.1:18800 -server-pid "$pid" -user admin -password scale-pass-1 -path "$id" -c 64 -d 10s | grep -E 'throughput|latency|server CPU'
echo "   floor ($size bytes): $(bin/rfbench -floor-bytes "$size" -c 64 -d 10s | grep -E 'latency')"
echo "== the same at $rate requests a second"
bin/rfbench -url http://127.0.0.1:18800 -server-pid "$pid" -user admin -password scale-pass-1 -path "$id" -c 64 -rate "$rate" -d 10s | grep -E 'throughput|latency|server CPU'
echo "   floor ($size bytes): $(bin/rfbench -floor-bytes "$size" -c 64 -rate "$rate" -d 10s | grep -E 'latency')"
echo "RSS after load $(rss)"
echo "== every system once, paging the collection, one connection (curl)"
ts=$(date +%s%N)
for ((skip = 0; skip < n; skip += 1000)); do
  curl -fs -u admin:scale-pass-1 "http://127.0.0.1:18800/redfish/v1/Systems?\$skip=$skip"
done | grep -o '/redfish/v1/Systems/[0-9a-f-]\{36\}' |
  awk '{print "url = \"http://127.0.0.1:18800" $0 "\"\noutput = \"/dev/null\""}' >"$dir/scan"
curl -fs -u admin:scale-pass-1 -K "$dir/scan"
te=$(date +%s%N)
echo "read $(( $(wc -l <"$dir/scan") / 2 )) systems in $(( (te-ts)/1000000 )) ms; RSS after the pass $(rss)"
