#!/usr/bin/env bash
# Start-up: exec → READY=1 of waf-tokend with a fresh token in its state directory (nothing to
# fetch), timed from outside (Benchmarks/startup.py), alternating run by run with the anchor: a C
# program linked against libsystemd that sends READY=1 at once (Benchmarks/c-anchors/ready.c); the
# ratio of the medians, and the spread of the run-by-run ratios. Then what the time is made of:
# exec → exit of `waf-tokend --version` (loading, relocation, runtime set-up), with its CPU time
# and page faults. Then the client a script calls in a loop: `waf-tokenctl token` beside
# `curl --unix-socket` asking the same socket the same question (Benchmarks/exec-time.py).
#
#   Benchmarks/startup-bench.sh        (RUNS=50)
set -euo pipefail
cd "$(dirname "$0")/.."
source Benchmarks/lib.sh

RUNS=${RUNS:-50}
bench_setup startup
build_release waf-tokend waf-tokenctl waf-token-service
gcc -O2 -o "$work/ready" Benchmarks/c-anchors/ready.c -lsystemd
start_service

daemon_args=(--config /dev/null --application-integration-url "$url" --domain-name 127.0.0.1 --socket-path "$work/token.sock"
    --state-directory "$work/state" --log-level warning)
# One run to fetch a token into the state directory; every timed run serves it without a fetch.
mkdir "$work/state"
start_daemon "$work/token.sock" --state-directory "$work/state"
kill -TERM "$daemon"
wait "$daemon" 2>/dev/null || true
test -s "$work/state/token.json" || { echo "error: no token in the state directory" >&2; exit 1; }

python3 Benchmarks/startup.py 5 "$bin/waf-tokend" "${daemon_args[@]}" >/dev/null   # warm the page cache
echo "exec → READY=1, $RUNS runs each, alternating, $(nproc) cores; milliseconds"
printf "%-44s %8s %8s %8s %8s %11s   %s\n" "" median p10 p90 ratio runs goal
mapfile -t starts < <(python3 Benchmarks/startup.py "$RUNS" "$work/ready" -- "$bin/waf-tokend" "${daemon_args[@]}" \
    -- "$bin/waf-tokend" "${daemon_args[@]}" --readiness-wait-for-token true)
((${#starts[@]} == 3)) || { echo "error: Benchmarks/startup.py failed" >&2; exit 1; }
read -r c10 c_p10 c_p90 <<<"${starts[0]}"
row() {
    local name=$1 goal=$2 median p10 p90 spread
    read -r median p10 p90 spread <<<"$3"
    printf "%-44s %8s %8s %8s %7.2fx %11s   %s\n" "$name" "$median" "$p10" "$p90" "$(awk -v a="$median" -v b="$c10" 'BEGIN {print a / b}')" \
        "$spread" "$goal"
}
printf "%-44s %8s %8s %8s %8s %11s   %s\n" "C anchor (sd_notify READY=1 at once)" "$c10" "$c_p10" "$c_p90" "" "" "-"
row "waf-tokend, token in the state directory" "≤ 4x the anchor" "${starts[1]}"
row "waf-tokend, readiness.waitForToken: true" "≤ 4x the anchor" "${starts[2]}"
# CPU in milliseconds is a figure of this machine's speed too: beside it, the C anchor's exec →
# exit (without NOTIFY_SOCKET it only starts and ends), alternating, 5 rounds of 10 each.
for round in 1 2 3 4 5; do
    perf stat -x, -r 10 -e task-clock,page-faults -o "$work/perf.$round" "$bin/waf-tokend" --version >/dev/null
    env -u NOTIFY_SOCKET perf stat -x, -r 10 -e task-clock -o "$work/anchor.$round" "$work/ready"
done
median() { sort -n | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }
cpu=$(awk -F, '$3 == "task-clock" {print $1}' "$work"/perf.* | median)
faults=$(awk -F, '$3 == "page-faults" {print $1}' "$work"/perf.* | median)
anchor=$(awk -F, '$3 == "task-clock" {print $1}' "$work"/anchor.* | median)
printf "waf-tokend --version (exec → exit): %.2f ms CPU, %d page faults; the C anchor %.2f ms CPU (%.1fx) (goal: ≤ 3 ms CPU)\n" \
    "$cpu" "$faults" "$anchor" "$(awk -v a="$cpu" -v b="$anchor" 'BEGIN {print a / b}')"

# The command-line client against a running daemon, beside curl asking the same.
start_daemon "$work/token.sock" --state-directory "$work/state"
echo
echo "a token from the running daemon's socket, exec → exit, $RUNS runs each, alternating; milliseconds"
printf "%-44s %8s %8s %8s %8s %8s %11s   %s\n" "" median p10 p90 CPU ratio runs goal
mapfile -t asks < <(python3 Benchmarks/exec-time.py "$RUNS" -- curl -sf --unix-socket "$work/token.sock" -H "Accept: text/plain" \
    http://localhost/v1/token -- "$bin/waf-tokenctl" --socket "$work/token.sock" token)
((${#asks[@]} == 2)) || { echo "error: Benchmarks/exec-time.py failed" >&2; exit 1; }
read -r k_median k_p10 k_p90 k_cpu <<<"${asks[0]}"
read -r t_median t_p10 t_p90 t_cpu t_spread <<<"${asks[1]}"
printf "%-44s %8s %8s %8s %8s %8s %11s   %s\n" "curl --unix-socket …/v1/token" "$k_median" "$k_p10" "$k_p90" "$k_cpu" "" "" "-"
printf "%-44s %8s %8s %8s %8s %7.2fx %11s   %s\n" "waf-tokenctl token" "$t_median" "$t_p10" "$t_p90" "$t_cpu" \
    "$(awk -v a="$t_median" -v b="$k_median" 'BEGIN {print a / b}')" "$t_spread" "≤ 1.5x curl, ≤ 3 ms CPU"
