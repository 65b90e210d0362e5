#!/usr/bin/env bash
# Large values under write overload: a fresh local 3-server ensemble (`zoolog ensemble up 3`)
# and four concurrent benchmark clients, each with 25 sessions x 10 outstanding setData of
# 1 MB values (1,000 outstanding in all, under chroots /c1../c4 so that they do not collide).
# Prints each client's result line, the members' role changes, and a summary: total ops/s,
# clients that failed, how often a member went looking, and the largest resident memory of a
# member (sampled every second).
#
# usage: bench/large_values_overload.sh ZOOLOG_BINARY OUT_DIR
set -euo pipefail

binary=$1
out=$2
rm -rf "$out"
mkdir -p "$out"

"$binary" ensemble up 3 --dir "$out/ensemble" > "$out/up.log" 2>&1 &
up_pid=$!
trap 'kill "$up_pid" 2>/dev/null || true' EXIT
for _ in $(seq 1 120); do
    grep -q "connect string" "$out/up.log" 2>/dev/null && break
    sleep 0.5
done
servers=$(awk '/connect string/ {print $3}' "$out/up.log")
[ -n "$servers" ] || { echo "the ensemble did not start: see $out/up.log" >&2; exit 1; }
for client in 1 2 3 4; do
    "$binary" shell -server "$servers" create "/c$client" > /dev/null
done

pids=""
for pid_file in "$out"/ensemble/s*/pid; do
    pids="$pids $(cat "$pid_file")"
done
(
    while true; do
        line=$(date +%s)
        for pid in $pids; do
            line="$line $(ps -o rss= -p "$pid" || echo 0)"
        done
        echo "$line"
        sleep 1
    done
) > "$out/rss.txt" 2>/dev/null &
sampler=$!

clients=()
for client in 1 2 3 4; do
    # A client older than the fix of its reconnect wait could hang once its servers stalled.
    timeout 300 "$binary" bench --servers "$servers/c$client" --workload throughput --read-ratios 0 \
        --value-bytes 1000000 --sessions 25 --outstanding 10 --warmup-s 2 --duration-s 15 \
        --out "$out/bench-$client" > "$out/bench-$client.log" 2>&1 &
    clients+=($!)
done
for client in "${clients[@]}"; do
    wait "$client" || true
done
kill "$sampler" 2>/dev/null || true

for client in 1 2 3 4; do
    echo "client $client: $(grep -E 'read_ratio=0 \||bench:' "$out/bench-$client.log" || true)"
done
grep -h "ensemble status" "$out"/ensemble/s*/server.log | cut -c1-160 || true
ops=$( (grep -h "read_ratio=0 |" "$out"/bench-*.log || true) | awk -F'|' '{s += $4} END {print s + 0}')
failed=$( (grep -l "bench:" "$out"/bench-*.log || true) | wc -l)
looking=$( (grep -h "status=Looking" "$out"/ensemble/s*/server.log || true) | wc -l)
rss_mib=$(awk '{for (i = 2; i <= NF; i++) if ($i > max) max = $i} END {print int(max / 1024)}' "$out/rss.txt")
echo "summary: ops/s=$ops clients_failed=$failed looking=$looking max_member_rss_mib=$rss_mib"
# Each run leaves several GB of logs and snapshots per member; the servers' logs stay.
kill "$up_pid" 2>/dev/null || true
wait "$up_pid" 2>/dev/null || true
rm -rf "$out"/ensemble/s*/data
