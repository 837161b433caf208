#!/usr/bin/env bash
# The HTTP/2 memory attacks of issue 32 at full scale: for each kind and
# each number of sources, a fresh vbmcd over the sim backend on loopback
# (HTTPS, its self-signed certificate) gets 1,000 ordinary GETs (its idle
# footprint), then rfbench -attack opens 128 connections (the per-source
# cap) from each of 1 or 40 source addresses (127.0.0.1 to 127.0.0.40),
# fills each with as many streams as vbmcd allows and holds them, sampling
# vbmcd's VmRSS from /proc every 50 ms; halfway through, a GET and a
# session login from 127.0.0.254 show whether others are still served;
# then everything is closed and VmRSS read again after 10 s.
# Usage: bash hack/attack-h2.sh [h2|bmc]
#   ATTACK_KINDS="h2-announced-body h2-stream-flood" runs only those,
#   ATTACK_SOURCES="1" only one source, HOLD=20s the hold, CONNS=128 the
#   connections per source, VBMCD=path attacks that binary instead of the
#   one built here (for the "before" figures), MAX_RSS=3000 stops an attack
#   when vbmcd passes that many MB (so that a vbmcd that grows does not
#   take the machine with it).
#
# bash hack/attack-h2.sh bmc: the body attacks of issue 46 instead, at a
# machine's own BMC of a vendor personality. vbmcd gives its 10 machines
# iLO 6 BMCs of their own on 127.46.0.1-127.46.0.10 (HTTPS), and the attack
# goes to the first: CONNS HTTP/1.1 connections from each of 1 or 16
# sources, each sending a chunked body of about 1 MiB whose last chunk
# never comes (another connection when the server closes one); the probes
# and the memory readings are as above. bmc-chunked-login sends logins
# without credentials, bmc-chunked-patch PATCHes the caller's own account
# as a ReadOnly account it makes at that BMC first.
# The CI versions of the same attacks, small: go test ./internal/vbmcd -run
# 'TestH2AttacksBounded|TestVendorBMCBodyAttackBounded'.
set -euo pipefail
cd "$(dirname "$0")/.."
port=18124
bmcport=18446
case ${1:-h2} in
h2)
  kinds=${ATTACK_KINDS:-h2-announced-body h2-bodiless-auth h2-bodiless-login h2-stream-flood}
  sources=${ATTACK_SOURCES:-1 40}
  url=https://127.0.0.1:$port
  bmcflags=()
  ;;
bmc)
  kinds=${ATTACK_KINDS:-bmc-chunked-login bmc-chunked-patch}
  sources=${ATTACK_SOURCES:-1 16}
  url=https://127.46.0.1:$bmcport
  bmcflags=(--personality ilo6 --bmc-addresses 127.46.0.1-127.46.0.10 --bmc-redfish-port "$bmcport" --bmc-ipmi-port 0)
  ;;
*)
  echo "usage: bash hack/attack-h2.sh [h2|bmc]" >&2
  exit 2
  ;;
esac
hold=${HOLD:-20s}
conns=${CONNS:-128}
maxrss=${MAX_RSS:-3000}
go build -o bin/ ./cmd/vbmcd ./cmd/rfbench
vbmcd=${VBMCD:-bin/vbmcd}
dir=$(mktemp -d)
pid=
trap '[ -n "$pid" ] && kill $pid 2>/dev/null; rm -rf "$dir"' EXIT
printf 'username: admin\npassword: attack-pass\n' >"$dir/creds.yaml"
chmod 600 "$dir/creds.yaml"
echo "vbmcd: $vbmcd ($(git rev-parse --short HEAD 2>/dev/null || echo '?'))"
echo "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo); load average: $(cut -d' ' -f1-3 /proc/loadavg)"
for kind in $kinds; do
  for n in $sources; do
    rm -rf "$dir/state" "$dir/media"
    "$vbmcd" --backend sim --sim-nodes 10 --redfish-addr 127.0.0.1:$port --ipmi=false --metrics-addr "" "${bmcflags[@]}" \
      --credentials-file "$dir/creds.yaml" --state-dir "$dir/state" --media-dir "$dir/media" >"$dir/vbmcd.log" 2>&1 &
    pid=$!
    for _ in $(seq 100); do curl -fsk -o /dev/null "$url/redfish/v1/" && break; sleep 0.1; done
    bin/rfbench -url "$url" -server-pid $pid -user admin -password attack-pass -d 1s -warmup 0 -c 2 >/dev/null
    bin/rfbench -url "$url" -server-pid $pid -user admin -password attack-pass \
      -attack "$kind" -sources "$n" -c "$conns" -hold "$hold" -settle 10s -max-rss "$maxrss" || echo "rfbench failed"
    echo "vbmcd log lines: $(wc -l <"$dir/vbmcd.log")"
    echo
    kill $pid; wait $pid 2>/dev/null || true
    pid=
  done
done
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
