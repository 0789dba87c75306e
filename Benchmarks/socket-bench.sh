#!/usr/bin/env bash
# GET /v1/token over the Unix socket with h2load (HTTP/1.1, keep-alive) at 16 and 64 connections,
# beside C anchors in the same run (Benchmarks/c-anchors/responder.c, a body of the daemon's size):
# an edge-triggered responder that reads to EAGAIN and answers a read's requests in one writev, and
# a level-triggered one that reads once per event and writes once per request, each with one thread
# and one per core; the fastest is the anchor. Each figure is the median of RUNS runs, the servers
# alternating within each run. Then CPU time and syscalls per request of the daemon and of the
# anchor (perf stat), the daemon's memory after RSS_REQUESTS more requests, and the wake-ups at
# rest of a second daemon that no client talks to, counted over IDLE_SECONDS while the rest runs
# (a thread that sleeps is not woken by load elsewhere; the run stays under 3 minutes).
#
#   Benchmarks/socket-bench.sh   (RUNS=3 REQUESTS=200000 CONNECTIONS="16 64" RSS_REQUESTS=500000 IDLE_SECONDS=60)
set -euo pipefail
cd "$(dirname "$0")/.."
source Benchmarks/lib.sh

RUNS=${RUNS:-3}
REQUESTS=${REQUESTS:-200000}
CONNECTIONS=${CONNECTIONS:-16 64}
RSS_REQUESTS=${RSS_REQUESTS:-500000}
IDLE_SECONDS=${IDLE_SECONDS:-60}
bench_setup socket

build_release waf-tokend waf-token-service
gcc -O2 -o "$work/responder" Benchmarks/c-anchors/responder.c -lpthread
start_service
mkdir -p "$work/idle"
start_daemon "$work/idle/token.sock" --state-directory "$work/idle" ${DAEMON_ARGS:-}
idle_daemon=$daemon
start_daemon "$work/token.sock" ${DAEMON_ARGS:-}
sleep 2
idle_wakeups "$idle_daemon" "$IDLE_SECONDS" >"$work/idle.out" &
idle_counter=$!
body=$(curl -s --unix-socket "$work/token.sock" http://localhost/v1/token | wc -c)

cores=$(nproc)
anchors=("et 1" "et $cores" "lt 1" "lt $cores")
declare -A anchor_pid
for anchor in "${anchors[@]}"; do
    read -r shape threads <<<"$anchor"
    "$work/responder" "$work/$shape$threads.sock" "$body" "$threads" "$shape" >"$work/$shape$threads.out" &
    pids+=($!)
    anchor_pid[$shape$threads]=$!
    wait_for "grep -q ready $work/$shape$threads.out"
done

describe() { case $1 in et*) echo "C epoll edge-triggered, ${1#et} thread(s)";; lt*) echo "C epoll level-triggered, ${1#lt} thread(s)";; esac; }
echo "GET /v1/token over a Unix socket: h2load --h1 -t 1 -n $REQUESTS, median of $RUNS runs, $cores cores, body $body bytes"
echo "anchors: C epoll responders (edge-triggered: read to EAGAIN, one writev per read; level-triggered: one read per event, one write per request), 1 and $cores threads"
printf "%-12s %14s %8s %8s   %-44s %14s %8s %8s %7s %6s\n" connections "waf-tokend r/s" "p50 ms" "p99 ms" "fastest anchor" "r/s" "p50 ms" "p99 ms" ratio goal
fastest=et1
for connections in $CONNECTIONS; do
    h2load_run "$work/token.sock" "$connections" 20000 /v1/token >/dev/null   # warm-up
    declare -A rows=()
    for ((run = 0; run < RUNS; run++)); do
        rows[daemon]+="$(h2load_run "$work/token.sock" "$connections" "$REQUESTS" /v1/token)"$'\n'
        for anchor in "${anchors[@]}"; do
            name=${anchor/ /}
            rows[$name]+="$(h2load_run "$work/$name.sock" "$connections" "$REQUESTS" /v1/token)"$'\n'
        done
    done
    median() { median_row $(printf '%s' "${rows[$1]}" | tr ' ' '_') | tr '_' ' '; }
    read -r rate p50 p99 <<<"$(median daemon)"
    best=0
    others=""
    for anchor in "${anchors[@]}"; do
        name=${anchor/ /}
        read -r arate ap50 ap99 <<<"$(median "$name")"
        others+=" $name $arate"
        if awk -v a="$arate" -v b="$best" 'BEGIN {exit !(a > b)}'; then best=$arate bp50=$ap50 bp99=$ap99 bname=$name; fi
    done
    fastest=$bname
    printf "%-12s %14s %8s %8s   %-44s %14s %8s %8s %6.2fx %6s\n" "$connections" "$rate" "$p50" "$p99" "$(describe "$bname")" "$best" "$bp50" "$bp99" \
        "$(awk -v a="$rate" -v b="$best" 'BEGIN {print a / b}')" "≥0.90x"
    echo "             (every anchor, req/s:$others)"
done

# CPU time and syscalls per request, 16 connections, the daemon and the fastest anchor of the last
# row, counted by perf (which, unlike strace, barely slows what it counts).
per_request() {
    local requests=100000 ticks
    ticks=$(cpu_ticks "$1")
    read -r cpu calls <<<"$(perf_counts "$1" h2load_run "$2" 16 "$requests" /v1/token)"
    awk -v c="$calls" -v t="$cpu" -v n="$requests" 'BEGIN {printf "%.2f syscalls, %.2f µs CPU", c / n, t * 1000 / n}'
    echo " ($(user_system "$ticks" "$(cpu_ticks "$1")" "$requests"))"
}
echo "per request, 16 connections: waf-tokend $(per_request "$daemon" "$work/token.sock"); $(describe "$fastest") $(per_request "${anchor_pid[$fastest]}" "$work/$fastest.sock") (goal: CPU ≤ 1.5x the anchor's)"
strace -c -f -q -p "$daemon" -o "$work/strace.out" &
tracer=$!
sleep 0.5
h2load_run "$work/token.sock" 16 20000 /v1/token >/dev/null
kill -INT "$tracer"; wait "$tracer" 2>/dev/null || true
echo "the daemon's syscalls in 20,000 requests at 16 connections (strace -c):"
awk 'NR > 2 && $1 !~ /^-/ && $NF != "total" {printf "  %-16s %9s\n", $NF, $4}' "$work/strace.out" | head -8

before=$(awk '/^VmRSS/ {print $2}' "/proc/$daemon/status")
h2load_run "$work/token.sock" 16 "$RSS_REQUESTS" /v1/token >/dev/null
after=$(awk '/^VmRSS/ {print $2}' "/proc/$daemon/status")
echo "RSS: $((before / 1024)) MiB after the runs, $((after / 1024)) MiB after $RSS_REQUESTS more requests (growth $((after - before)) KiB)"
echo "$(memory "$daemon")"

wait "$idle_counter"
read -r woken detail <"$work/idle.out"
python3 -c "print(f'at rest: {$woken} context switches in $IDLE_SECONDS s, {$woken / $IDLE_SECONDS:.2f} per second (goal ≤ 0.1) $detail')"
