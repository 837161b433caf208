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
# Environment: VBMCD (a vbmcd binary other than bin/vbmcd's), BASE (a
# second vbmcd, e.g. an older commit's build: each round then runs it too,
# the three in a rotating order, and its ratio is printed beside),
# BUILD=0 (use bin/ as it is).
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x /usr/local/go/bin/go ] && export PATH=$PATH:/usr/local/go/bin
pairs=${1:-7}
dur=${2:-10s}
[ "${BUILD:-1}" = 0 ] || go build -o bin/ ./cmd/vbmcd ./cmd/rfbench
vbmcd=${VBMCD:-bin/vbmcd}
base=${BASE:-}
work=$(mktemp -d)
pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; wait 2>/dev/null; rm -rf "$work"' EXIT

# startvbmcd starts vbmcd (or the binary $1) on a free loopback port;
# sets pid and url.
startvbmcd() {
  rm -rf "$work/state" "$work/media" && mkdir -p "$work/state" "$work/media"
  "${1:-$vbmcd}" --backend sim --insecure-http --redfish-addr 127.0.0.1:0 --state-dir "$work/state" \
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

runvbmcd() { # binary output
  startvbmcd "$1"
  bin/rfbench -url "$url" -server-pid "$pid" -path "$sys" -c 8 -d "$dur" >"$2"
  stopvbmcd
}
runfloor() { bin/rfbench -floor-bytes "$bytes" -c 8 -d "$dur" >"$work/f"; }

echo "GET $sys ($bytes bytes), 8 connections, $dur per run, $pairs pairs; load before: $(cut -d' ' -f1-3 /proc/loadavg)"
[ -z "$base" ] || echo "base: $base"
printf '%-5s %-6s %12s %12s %14s %14s %7s' pair first "vbmcd req/s" "floor req/s" "vbmcd ms/req" "floor ms/req" ratio
[ -z "$base" ] && echo || printf ' %12s %14s %10s\n' "base req/s" "base ms/req" "base ratio"
ratios=()
bratios=()
for i in $(seq 1 "$pairs"); do
  if [ -z "$base" ]; then
    if [ $((i % 2)) = 1 ]; then order="vbmcd floor"; else order="floor vbmcd"; fi
  else
    case $((i % 3)) in
    1) order="vbmcd floor base" ;;
    2) order="floor base vbmcd" ;;
    0) order="base vbmcd floor" ;;
    esac
  fi
  for run in $order; do
    case $run in
    vbmcd) runvbmcd "$vbmcd" "$work/v" ;;
    base) runvbmcd "$base" "$work/b" ;;
    floor) runfloor ;;
    esac
  done
  read -r vr vc < <(field "$work/v")
  read -r fr fc < <(field "$work/f")
  ratio=$(awk -v a="$vr" -v b="$fr" 'BEGIN {printf "%.3f", a/b}')
  ratios+=("$ratio")
  printf '%-5s %-6s %12s %12s %14s %14s %7s' "$i" "${order%% *}" "$vr" "$fr" "$vc" "$fc" "$ratio"
  if [ -n "$base" ]; then
    read -r br bc < <(field "$work/b")
    bratio=$(awk -v a="$br" -v b="$fr" 'BEGIN {printf "%.3f", a/b}')
    bratios+=("$bratio")
    printf ' %12s %14s %10s' "$br" "$bc" "$bratio"
  fi
  echo
done
summary() { # name ratios...
  local name=$1
  shift
  printf '%s\n' "$@" | sort -n | awk -v n="$name" '{a[NR]=$1} END {m = NR % 2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2; printf "ratio %s/floor: median %.3f, lowest %.3f, highest %.3f over %d pairs\n", n, m, a[1], a[NR], NR}'
}
summary vbmcd "${ratios[@]}"
[ -z "$base" ] || summary base "${bratios[@]}"
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
