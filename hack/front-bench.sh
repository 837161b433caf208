#!/usr/bin/env bash
# What vbmcd's Redfish front costs against this machine's floor (issue 46),
# loopback only. ROUNDS (default 7), each of three runs of DURATION
# (default 10s) after rfbench's 1 s warm-up:
#   vbmcd  bin/vbmcd --backend sim over plain HTTP with every bound at its
#          default (connections per source and in all, requests in flight,
#          unauthenticated requests, body budget, timeouts), GET of one
#          System, Basic auth, 8 keep-alive connections (bin/rfbench -url);
#   floor  bin/rfbench -floor-bytes N: a bare Go net/http server answering
#          every GET with N bytes, N the System's own size, same load
#          (Content-Type application/json, Content-Length, Date; no auth);
#   copy   bin/rfbench -floor-copy FILE: a bare Go net/http server answering
#          every GET with the System's response as vbmcd sent it (curl -si:
#          the same status, headers and body byte for byte, net/http's own
#          Date), after one comparison of the Authorization header with
#          the expected Basic value; same load and the same request bytes
#          (the System's path). What vbmcd's front adds to the very same
#          answer.
# The order rotates (vbmcd, floor, copy, then floor, copy, vbmcd, ...), so
# that a change of the machine's load over the run falls on all alike.
# Each run is a fresh server. Prints each round's req/s, the servers' CPU
# per request and the ratios vbmcd/floor and vbmcd/copy, then the median,
# lowest and highest ratios (and the same by CPU per request: the floor's
# over vbmcd's, less swayed by other work than throughput), and the load
# average before and after.
# Run it holding the machine's lock when other work shares it:
#   flock -o /var/lock/bmlab-e2e.lock bash hack/front-bench.sh 9 10s
# Environment: VBMCD (a vbmcd binary other than bin/vbmcd's), BASE (a
# second vbmcd, e.g. an older commit's build: each round then runs it too,
# the four in a rotating order, and its ratios are printed beside),
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
curl -sfi -u admin:password -o "$work/copy.http" "$url$sys"
stopvbmcd

runvbmcd() { # binary output
  startvbmcd "$1"
  bin/rfbench -url "$url" -server-pid "$pid" -path "$sys" -c 8 -d "$dur" >"$2"
  stopvbmcd
}
runfloor() { bin/rfbench -floor-bytes "$bytes" -c 8 -d "$dur" >"$work/f"; }
runcopy() { bin/rfbench -floor-copy "$work/copy.http" -path "$sys" -c 8 -d "$dur" >"$work/c"; }

echo "GET $sys ($bytes bytes), 8 connections, $dur per run, $pairs rounds; load before: $(cut -d' ' -f1-3 /proc/loadavg)"
[ -z "$base" ] || echo "base: $base"
runs=(vbmcd floor copy)
[ -z "$base" ] || runs+=(base)
printf '%-5s %-6s %11s %11s %11s %9s %9s %9s %7s %7s' round first "vbmcd req/s" "floor req/s" "copy req/s" "vbmcd µs" "floor µs" "copy µs" "v/floor" "v/copy"
[ -z "$base" ] && echo || printf ' %11s %9s %7s %7s\n' "base req/s" "base µs" "b/floor" "b/copy"
ratios=()
cratios=()
bratios=()
bcratios=()
cpu=()  # the floor's CPU per request over vbmcd's: the same ratio by CPU
ccpu=() # the copy's over vbmcd's
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.3f", a/b}'; }
us() { awk -v a="$1" 'BEGIN {printf "%.1f", a*1000}'; }
for i in $(seq 1 "$pairs"); do
  order=()
  for j in $(seq 0 $((${#runs[@]} - 1))); do order+=("${runs[$(((i - 1 + j) % ${#runs[@]}))]}"); done
  for run in "${order[@]}"; do
    case $run in
    vbmcd) runvbmcd "$vbmcd" "$work/v" ;;
    base) runvbmcd "$base" "$work/b" ;;
    floor) runfloor ;;
    copy) runcopy ;;
    esac
  done
  read -r vr vc < <(field "$work/v")
  read -r fr fc < <(field "$work/f")
  read -r cr cc < <(field "$work/c")
  r1=$(ratio "$vr" "$fr")
  r2=$(ratio "$vr" "$cr")
  ratios+=("$r1")
  cratios+=("$r2")
  cpu+=("$(ratio "$fc" "$vc")")
  ccpu+=("$(ratio "$cc" "$vc")")
  printf '%-5s %-6s %11s %11s %11s %9s %9s %9s %7s %7s' "$i" "${order[0]}" "$vr" "$fr" "$cr" "$(us "$vc")" "$(us "$fc")" "$(us "$cc")" "$r1" "$r2"
  if [ -n "$base" ]; then
    read -r br bc < <(field "$work/b")
    b1=$(ratio "$br" "$fr")
    b2=$(ratio "$br" "$cr")
    bratios+=("$b1")
    bcratios+=("$b2")
    printf ' %11s %9s %7s %7s' "$br" "$(us "$bc")" "$b1" "$b2"
  fi
  echo
done
summary() { # name ratios...
  local name=$1
  shift
  printf '%s\n' "$@" | sort -n | awk -v n="$name" '{a[NR]=$1} END {m = NR % 2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2; printf "ratio %s: median %.3f, lowest %.3f, highest %.3f over %d rounds\n", n, m, a[1], a[NR], NR}'
}
summary vbmcd/floor "${ratios[@]}"
summary vbmcd/copy "${cratios[@]}"
summary "by CPU per request, floor/vbmcd" "${cpu[@]}"
summary "by CPU per request, copy/vbmcd" "${ccpu[@]}"
[ -z "$base" ] || summary base/floor "${bratios[@]}"
[ -z "$base" ] || summary base/copy "${bcratios[@]}"
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
