#!/usr/bin/env bash
# A bounded soak of vbmcd on loopback against four libvirt domains for
# DURATION: Redfish GETs (rfbench, RF_RATE a second over 4 connections), IPMI
# power-status queries with a new session each (ipmiload, IPMI_RATE a second
# over 2 clients), and every 10 s a churn round: a Redfish session created
# and deleted, one domain powered on or off, a virtual-media image inserted
# or ejected. Every INTERVAL it samples the daemon's goroutines (from
# /metrics), open file descriptors and resident memory: what should stay
# flat does or does not, and the table shows which.
# Usage: bash hack/soak.sh [DURATION] [INTERVAL]   (default 30m 60s; root, libvirtd up)
# RF_RATE (default 200) and IPMI_RATE (default 50) keep the host usable.
set -euo pipefail
cd "$(dirname "$0")/.."
dur=${1:-30m}; every=${2:-60}
rf_rate=${RF_RATE:-200}; ipmi_rate=${IPMI_RATE:-50}
go build -o bin/ ./cmd/vbmcd ./cmd/rfbench
go build -o bin/ipmiload ./internal/ipmi/bench/ipmiload
dir=$(mktemp -d)
prefix=soak-$$-
cleanup() {
  kill "$rf" "$ip" "$churn" "$web" "$pid" 2>/dev/null || true
  for i in 1 2 3 4; do
    virsh -q destroy "${prefix}$i" >/dev/null 2>&1 || true
    virsh -q undefine "${prefix}$i" >/dev/null 2>&1 || true
  done
  rm -rf "$dir"
}
trap cleanup EXIT
for i in 1 2 3 4; do
  printf "<domain type='qemu'><name>%s%d</name><memory unit='MiB'>64</memory><vcpu>1</vcpu><os><type arch='x86_64' machine='pc'>hvm</type></os><devices/></domain>" "$prefix" "$i" >"$dir/d$i.xml"
  virsh -q define "$dir/d$i.xml" >/dev/null
done
printf 'username: admin\npassword: soak-pass-1\n' >"$dir/c.yaml"; chmod 600 "$dir/c.yaml"
bin/vbmcd --libvirt-uri qemu:///system --domains "${prefix}*" --redfish-addr 127.0.0.1:18600 --insecure-http \
  --ipmi --ipmi-port-base 41400 --metrics-addr 127.0.0.1:18601 --credentials-file "$dir/c.yaml" \
  --state-dir "$dir/state" --media-dir "$dir/media" --media-allow-loopback >"$dir/vbmcd.log" 2>&1 &
pid=$!
for _ in $(seq 50); do curl -fs -o /dev/null http://127.0.0.1:18601/metrics && break; sleep 0.2; done
# The image the churn inserts, served on loopback.
mkdir -p "$dir/www"
[ -f testdata/iso/marker.iso ] || bash hack/build-marker-iso.sh testdata/iso/marker.iso BMLAB-MARKER-BOOTED halt >/dev/null
cp testdata/iso/marker.iso "$dir/www/"
/usr/bin/python3 -m http.server 18602 --bind 127.0.0.1 --directory "$dir/www" >/dev/null 2>&1 &
web=$!
rf_url=http://127.0.0.1:18600/redfish/v1
api() { curl -fsS -o /dev/null -u admin:soak-pass-1 -H 'Content-Type: application/json' "$@"; }
sys1=$(virsh domuuid "${prefix}1"); sys2=$(virsh domuuid "${prefix}2")
churn_loop() {
  local i=0 tok
  while sleep 10; do
    i=$((i+1))
    # A session, logged in and out.
    tok=$(curl -fsS -D - -o /dev/null -H 'Content-Type: application/json' -d '{"UserName":"admin","Password":"soak-pass-1"}' \
      "$rf_url/SessionService/Sessions" | awk -F': ' 'tolower($1)=="location"{print $2}' | tr -d '\r')
    [ -n "$tok" ] && api -X DELETE "http://127.0.0.1:18600$tok" || echo "churn $i: session failed" >&2
    # Power, alternately on and off.
    if [ $((i % 2)) = 1 ]; then t=On; else t=ForceOff; fi
    api -d "{\"ResetType\":\"$t\"}" "$rf_url/Systems/$sys1/Actions/ComputerSystem.Reset" || echo "churn $i: $t failed" >&2
    # Virtual media, alternately inserted and ejected.
    if [ $((i % 2)) = 1 ]; then
      api -d '{"Image":"http://127.0.0.1:18602/marker.iso"}' "$rf_url/Managers/$sys2/VirtualMedia/Cd/Actions/VirtualMedia.InsertMedia" || echo "churn $i: insert failed" >&2
    else
      api -d '{}' "$rf_url/Managers/$sys2/VirtualMedia/Cd/Actions/VirtualMedia.EjectMedia" || echo "churn $i: eject failed" >&2
    fi
  done
}
churn_loop 2>"$dir/churn.err" &
churn=$!
secs=$(( $(echo "$dur" | sed 's/m$/*60/; s/s$//; s/h$/*3600/' | bc) ))
bin/rfbench -url http://127.0.0.1:18600 -server-pid "$pid" -user admin -password soak-pass-1 -c 4 -rate "$rf_rate" -d "${secs}s" -warmup 0 >"$dir/rfbench.txt" 2>&1 &
rf=$!
IPMILOAD_PASSWORD=soak-pass-1 bin/ipmiload -pid "$pid" -base 41400 -bmcs 4 -clients 2 -rate "$ipmi_rate" -duration "${secs}s" >"$dir/ipmiload.txt" 2>&1 &
ip=$!
printf '%8s %11s %8s %9s\n' elapsed goroutines fds rss_kib
t0=$(date +%s)
while kill -0 "$rf" 2>/dev/null; do
  g=$(curl -fs http://127.0.0.1:18601/metrics | awk '/^go_goroutines /{print $2}')
  f=$(ls /proc/$pid/fd | wc -l)
  r=$(awk '/^VmRSS/{print $2}' /proc/$pid/status)
  printf '%7ds %11s %8s %9s\n' $(( $(date +%s) - t0 )) "$g" "$f" "$r"
  sleep "$every"
done
wait "$ip" || true
echo "--- rfbench"; cat "$dir/rfbench.txt"
echo "--- ipmiload"; cat "$dir/ipmiload.txt"
echo "--- churn failures: $(wc -l <"$dir/churn.err")"; head -5 "$dir/churn.err"
echo "--- errors logged: $(grep -c '"level":"error"\|ERROR' "$dir/vbmcd.log" || true)"
