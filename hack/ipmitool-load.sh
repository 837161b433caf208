#!/usr/bin/env bash
# 8 clients, each running `ipmitool power status` (a new session each time)
# against a running vbmcd for D seconds; prints queries/s and vbmcd CPU/query.
# Usage: IPMILOAD_PASSWORD=... bash hack/ipmitool-load.sh VBMCD_PID IPMI_PORT_BASE [SECONDS]
pid=$1; base=$2; d=${3:-10}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cpu() { awk '{print $14+$15}' /proc/$pid/stat; }
c0=$(cpu); end=$(( $(date +%s) + d ))
for i in $(seq 0 7); do
  ( n=0; while [ $(date +%s) -lt $end ]; do ipmitool -I lanplus -H 127.0.0.1 -p $((base+i)) -U admin -P "$IPMILOAD_PASSWORD" power status >/dev/null 2>&1 && n=$((n+1)); done; echo $n ) > "$tmp"/count-$i &
done
wait
c1=$(cpu); total=$(cat "$tmp"/count-* | paste -sd+ | bc)
echo "ipmitool: $total queries in ${d}s, $((total / d)) queries/s, vbmcd CPU $(echo "scale=3; ($c1-$c0)*10/$total" | bc) ms/query"
