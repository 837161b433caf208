#!/usr/bin/env bash
# What vbmcd's Redfish front costs against this machine's floor (issue 46),
# loopback only. PAIRS rounds (default 7), each of two runs of DURATION
# (default 10s) after rfbench's 1 s warm-up:
#   vbmcd  bin/vbmcd --backend sim over plain HTTP with every bound at its
#          default (connections per source and in all, requests in flight,
#          unauthenticated requests, body budget, timeouts), GET of one
#          System, Basic auth, 8 keep-alive connections (bin/rfbench -url);
#   floor  bin/rfbench -floor-bytes N: a bare Go net/http server answering
#          every GET with N bytes, N the System's own size, same load.
# The order alternates (vbmcd first in odd rounds, floor first in even
# ones), so that a change of the machine's load over the run falls on both
# alike. Each run is a fresh server. Prints each round's req/s, the
# server's CPU per request and the ratio vbmcd/floor, then the median,
# lowest and highest ratio, and the load average before and after.
# Run it holding the machine's lock when other work shares it:
#   flock /var/lock/bmlab-e2e.lock bash hack/front-bench.sh 9 10s
# Environment: VBMCD (a vbmcd binary other than bin/vbmcd's, e.g. another
# build to compare), BUILD=0 (use bin/ as it is).
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x /usr/local/go/bin/go ] && export PATH=$PATH:/usr/local/go/bin
pairs=${1:-7}
dur=${2:-10s}
[ "${BUILD:-1}" = 0 ] || go build -o bin/ ./cmd/vbmcd ./cmd/rfbench
vbmcd=${VBMCD:-bin/vbmcd}
work=$(mktemp -d)
pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; wait 2>/dev/null; rm -rf "$work"' EXIT

# startvbmcd starts vbmcd on a free loopback port; sets pid and url.
startvbmcd() {
  rm -rf "$work/state" "$work/media" && mkdir -p "$work/state" "$work/media"
  "$vbmcd" --backend sim --insecure-http --redfish-addr 127.0.0.1:0 --state-dir "$work/state" \
    --media-dir "$work/media" --log-level warn >"$work/log" 2>&1 &
  pid=$!
  url=
  for _ in $(seq 1 100); do
    url=$(grep -o 'Redfish at http://127.0.0.1:[0-9]*' "$work/log" | cut -d' ' -f3) && [ -n "$url" ] && return
    sleep 0.1
  done
  echo "vbmcd did not start:" >&2
  cat "$work/log" >&2
  exit 1
}

stopvbmcd() { kill "$pid"; wait "$pid" 2>/dev/null || true; pid=; }

# field prints rfbench's req/s and server ms/request from its report.
field() { awk '/^throughput/ {r=$2} /^server CPU/ {c=$5} END {print r, c}' "$1"; }

# The System's size, for the floor.
startvbmcd
sys=$(curl -sf -u admin:password "$url/redfish/v1/Systems" | grep -o '"/redfish/v1/Systems/[^"]*"' | head -1 | tr -d '"')
bytes=$(curl -sf -u admin:password -o /dev/null -w '%{size_download}' "$url$sys")
stopvbmcd

runvbmcd() {
  startvbmcd
  bin/rfbench -url "$url" -server-pid "$pid" -path "$sys" -c 8 -d "$dur" >"$work/v"
  stopvbmcd
}
runfloor() { bin/rfbench -floor-bytes "$bytes" -c 8 -d "$dur" >"$work/f"; }

echo "GET $sys ($bytes bytes), 8 connections, $dur per run, $pairs pairs; load before: $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-5s %-6s %12s %12s %14s %14s %7s\n' pair first "vbmcd req/s" "floor req/s" "vbmcd ms/req" "floor ms/req" ratio
ratios=()
for i in $(seq 1 "$pairs"); do
  if [ $((i % 2)) = 1 ]; then first=vbmcd; runvbmcd; runfloor; else first=floor; runfloor; runvbmcd; fi
  read -r vr vc < <(field "$work/v")
  read -r fr fc < <(field "$work/f")
  ratio=$(awk -v a="$vr" -v b="$fr" 'BEGIN {printf "%.3f", a/b}')
  ratios+=("$ratio")
  printf '%-5s %-6s %12s %12s %14s %14s %7s\n' "$i" "$first" "$vr" "$fr" "$vc" "$fc" "$ratio"
done
printf '%s\n' "${ratios[@]}" | sort -n | awk '{a[NR]=$1} END {m = NR % 2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2; printf "ratio vbmcd/floor: median %.3f, lowest %.3f, highest %.3f over %d pairs\n", m, a[1], a[NR], NR}'
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
