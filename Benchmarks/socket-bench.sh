#!/usr/bin/env bash
# GET /v1/token over the Unix socket with h2load (HTTP/1.1, keep-alive) at 1, 16 and 64
# connections, beside the C anchor in the same run: an epoll responder answering a body of the same
# size (Benchmarks/c-anchors/responder.c), with one thread and with one per core; the faster is the
# anchor. Each figure is the median of RUNS runs, ours and the anchor's alternating. Then the
# syscalls and CPU time per request of both (strace -c; the CPU time of all threads from schedstat), the daemon's memory after
# RSS_REQUESTS more requests, and its wake-ups per second when idle.
#
#   Benchmarks/socket-bench.sh        (RUNS=3 REQUESTS=200000 RSS_REQUESTS=1000000 IDLE_SECONDS=60)
set -euo pipefail
cd "$(dirname "$0")/.."
source Benchmarks/lib.sh

RUNS=${RUNS:-3}
REQUESTS=${REQUESTS:-200000}
RSS_REQUESTS=${RSS_REQUESTS:-1000000}
IDLE_SECONDS=${IDLE_SECONDS:-60}
bench_setup socket

build_release waf-tokend waf-token-service
gcc -O2 -o "$work/responder" Benchmarks/c-anchors/responder.c -lpthread
start_service
start_daemon "$work/token.sock" ${DAEMON_ARGS:-}
body=$(curl -s --unix-socket "$work/token.sock" http://localhost/v1/token | wc -c)

for threads in 1 "$(nproc)"; do
    "$work/responder" "$work/c$threads.sock" "$body" "$threads" >"$work/responder$threads.out" &
    pids+=($!)
    wait_for "grep -q ready $work/responder$threads.out"
done
responder_one=${pids[-2]} responder_all=${pids[-1]}

echo "GET /v1/token over a Unix socket, h2load --h1 -t 1, $REQUESTS requests per run, median of $RUNS runs, $(nproc) cores, body $body bytes"
echo "anchor: the C epoll responder with 1 thread or $(nproc) threads, whichever is faster in this run"
printf "%-12s %14s %9s %9s %14s %9s %9s %7s\n" connections "waf-tokend r/s" "p50 ms" "p99 ms" "C epoll r/s" "p50 ms" "p99 ms" ratio
for connections in 1 16 64; do
    h2load_run "$work/token.sock" "$connections" 20000 /v1/token >/dev/null   # warm-up
    ours=() one=() all=()
    for ((run = 0; run < RUNS; run++)); do
        ours+=("$(h2load_run "$work/token.sock" "$connections" "$REQUESTS" /v1/token)")
        one+=("$(h2load_run "$work/c1.sock" "$connections" "$REQUESTS" /v1/token)")
        all+=("$(h2load_run "$work/c$(nproc).sock" "$connections" "$REQUESTS" /v1/token)")
    done
    read -r rate p50 p99 <<<"$(median_row "${ours[@]}")"
    read -r rate1 p501 p991 <<<"$(median_row "${one[@]}")"
    read -r rate2 p502 p992 <<<"$(median_row "${all[@]}")"
    if awk -v a="$rate1" -v b="$rate2" 'BEGIN {exit !(a >= b)}'; then anchor=("$rate1" "$p501" "$p991" 1); else anchor=("$rate2" "$p502" "$p992" "$(nproc)"); fi
    printf "%-12s %14s %9s %9s %14s %9s %9s %6.2fx   (anchor: %s thread(s))\n" "$connections" "$rate" "$p50" "$p99" \
        "${anchor[0]}" "${anchor[1]}" "${anchor[2]}" "$(awk -v a="$rate" -v b="${anchor[0]}" 'BEGIN {print a / b}')" "${anchor[3]}"
done

# Syscalls per request (strace counts them; its slowdown does not change the count much) and CPU
# time per request of the server (all its threads, /proc/PID/task/*/schedstat), 16 connections.
per_request() {
    local pid=$1 socket=$2 requests=100000 trace=$work/strace-$1.out
    strace -c -f -q -p "$pid" -o "$trace" &
    local tracer=$!
    sleep 0.5
    h2load_run "$socket" 16 "$requests" /v1/token >/dev/null
    kill -INT "$tracer"; wait "$tracer" 2>/dev/null || true
    local calls
    calls=$(awk '$NF == "total" {print $4}' "$trace")
    local before after
    before=$(cpu_nanoseconds "$pid")
    h2load_run "$socket" 16 "$requests" /v1/token >/dev/null
    after=$(cpu_nanoseconds "$pid")
    awk -v c="$calls" -v t="$((after - before))" -v n="$requests" 'BEGIN {printf "%.2f syscalls, %.2f µs CPU", c / n, t / 1000 / n}'
}
echo "per request, 16 connections: waf-tokend $(per_request "$daemon" "$work/token.sock");" \
    "C anchor (1 thread) $(per_request "$responder_one" "$work/c1.sock")"
echo "the daemon's syscalls during those 100,000 requests (strace -c):"
awk 'NR > 2 && $1 !~ /^-/ && $NF != "total" {printf "  %-16s %9s\n", $NF, $4}' "$work/strace-$daemon.out" | head -8

before=$(awk '/^VmRSS/ {print $2}' "/proc/$daemon/status")
h2load_run "$work/token.sock" 16 "$RSS_REQUESTS" /v1/token >/dev/null
after=$(awk '/^VmRSS/ {print $2}' "/proc/$daemon/status")
echo "RSS: $((before / 1024)) MiB after the runs, $((after / 1024)) MiB after $RSS_REQUESTS more requests (growth $((after - before)) KiB)"
echo "$(memory "$daemon")"

sleep 2
start=$(context_switches "$daemon")
sleep "$IDLE_SECONDS"
end=$(context_switches "$daemon")
python3 -c "print(f'idle: {($end - $start)} context switches in $IDLE_SECONDS s, {($end - $start) / $IDLE_SECONDS:.2f} wake-ups per second')"
