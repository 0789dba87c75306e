#!/usr/bin/env bash
# GET /v1/token over the Unix socket with h2load (HTTP/1.1, keep-alive) at 1, 16 and 64
# connections: requests/s and p50/p99 latency of waf-tokend, and in the same run of a minimal C
# epoll responder answering a body of the same size (the practical limit of this machine), as a
# ratio. Then the daemon's RSS before and after 1M more requests, and its wake-ups per second when
# idle (context switches of all its threads over a minute).
#
#   Benchmarks/socket-bench.sh        (REQUESTS=200000 RSS_REQUESTS=1000000 IDLE_SECONDS=60)
set -euo pipefail
cd "$(dirname "$0")/.."

REQUESTS=${REQUESTS:-200000}
RSS_REQUESTS=${RSS_REQUESTS:-1000000}
IDLE_SECONDS=${IDLE_SECONDS:-60}
work=$(mktemp -d /tmp/waf-socket-bench.XXXXXX)
pids=()
cleanup() { for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT

# The binaries as installed: release, Swift runtime linked in (make release).
build() { scripts/swift-release.sh --product "$1" >"$work/build.log" 2>&1 || { cat "$work/build.log"; exit 1; }; }
build waf-tokend
build waf-token-service
bin=$(scripts/swift-release.sh --show-bin-path)
gcc -O2 -o "$work/responder" Benchmarks/c-responder/responder.c

"$bin/waf-token-service" >"$work/service.out" 2>/dev/null &
pids+=($!)
until grep -q "^listening on" "$work/service.out" 2>/dev/null; do sleep 0.05; done
url=$(sed -n 's/^listening on //p' "$work/service.out")

"$bin/waf-tokend" --config /dev/null --application-integration-url "$url" --domain-name 127.0.0.1 \
    --socket-path "$work/token.sock" --log-level warning ${DAEMON_ARGS:-} 2>"$work/daemon.err" &
daemon=$!
pids+=($daemon)
until curl -s --unix-socket "$work/token.sock" 'http://localhost/v1/token?wait=10' -o /dev/null 2>/dev/null; do sleep 0.05; done
body=$(curl -s --unix-socket "$work/token.sock" http://localhost/v1/token | wc -c)

"$work/responder" "$work/c.sock" "$body" >"$work/responder.out" &
pids+=($!)
until grep -q ready "$work/responder.out" 2>/dev/null; do sleep 0.05; done

rss() { awk '/^VmRSS/ {print $2}' "/proc/$daemon/status"; }
# RSS, and what of it is the daemon's own (private) rather than shared, clean file pages.
memory() {
    awk '/^Rss:/ {r=$2} /^Private_Clean:/ {pc=$2} /^Private_Dirty:/ {pd=$2} /^Shared_Clean:/ {sc=$2}
         END {printf "RSS %.1f MiB: private dirty %.1f MiB, private clean %.1f MiB, shared clean %.1f MiB", r/1024, pd/1024, pc/1024, sc/1024}' \
        "/proc/$daemon/smaps_rollup"
}
switches() {
    local total=0
    for task in /proc/"$daemon"/task/*; do
        total=$((total + $(awk '/^voluntary_ctxt_switches|^nonvoluntary_ctxt_switches/ {sum += $2} END {print sum}' "$task/status")))
    done
    echo "$total"
}

# One h2load run: prints "requests/s p50_ms p99_ms".
load() {
    local socket=$1 connections=$2 requests=$3
    h2load --h1 -B "unix:$socket" -n "$requests" -c "$connections" -t 1 --log-file "$work/log" http://localhost/v1/token >"$work/h2load.out"
    local rate
    rate=$(sed -n 's/^finished in [^,]*, \([0-9.]*\) req\/s.*/\1/p' "$work/h2load.out")
    python3 - "$work/log" "$rate" <<'PY'
import statistics, sys
latencies = sorted(int(line.split("\t")[2]) for line in open(sys.argv[1]) if line.count("\t") >= 2)
def percentile(p): return latencies[min(len(latencies) - 1, int(len(latencies) * p))] / 1000
print(f"{float(sys.argv[2]):.0f} {percentile(0.50):.3f} {percentile(0.99):.3f}")
PY
}

echo "GET /v1/token over a Unix socket, h2load --h1, $REQUESTS requests per run, $(nproc) cores, body $body bytes"
printf "%-12s %14s %9s %9s %14s %9s %9s %7s\n" connections "waf-tokend r/s" "p50 ms" "p99 ms" "C epoll r/s" "p50 ms" "p99 ms" ratio
for connections in 1 16 64; do
    load "$work/token.sock" "$connections" 20000 >/dev/null   # warm-up
    read -r ours ours50 ours99 <<<"$(load "$work/token.sock" "$connections" "$REQUESTS")"
    read -r theirs theirs50 theirs99 <<<"$(load "$work/c.sock" "$connections" "$REQUESTS")"
    printf "%-12s %14s %9s %9s %14s %9s %9s %6.2fx\n" "$connections" "$ours" "$ours50" "$ours99" "$theirs" "$theirs50" "$theirs99" \
        "$(python3 -c "print($ours / $theirs)")"
done

before=$(rss)
load "$work/token.sock" 16 "$RSS_REQUESTS" >/dev/null
after=$(rss)
echo "RSS: $((before / 1024)) MiB after the runs, $((after / 1024)) MiB after $RSS_REQUESTS more requests (growth $((after - before)) KiB)"
echo "$(memory)"

sleep 2
start=$(switches)
sleep "$IDLE_SECONDS"
end=$(switches)
python3 -c "print(f'idle: {($end - $start)} context switches in $IDLE_SECONDS s, {($end - $start) / $IDLE_SECONDS:.2f} wake-ups per second')"
