#!/usr/bin/env bash
# Start-up: exec → READY=1 of waf-tokend with a fresh token in its state directory (nothing to
# fetch), timed from outside (Benchmarks/startup.py), beside the anchor in the same run: a C program
# linked against libsystemd that sends READY=1 at once (Benchmarks/c-anchors/ready.c). Then what the
# time is made of: exec → exit of `waf-tokend --version` (loading, relocation, runtime set-up),
# with its CPU time and page faults.
#
#   Benchmarks/startup-bench.sh        (RUNS=50)
set -euo pipefail
cd "$(dirname "$0")/.."
source Benchmarks/lib.sh

RUNS=${RUNS:-50}
bench_setup startup
build_release waf-tokend waf-token-service
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
echo "exec → READY=1, $RUNS runs each, $(nproc) cores; milliseconds"
printf "%-52s %8s %8s %8s   %s\n" "" median p10 p90 goal
row() { printf "%-52s %8s %8s %8s   %s\n" "$1" $(python3 Benchmarks/startup.py "$RUNS" "${@:3}") "$2"; }
row "C anchor (sd_notify READY=1 at once)" "-" "$work/ready"
row "waf-tokend, token in the state directory" "≤ 12 ms median" "$bin/waf-tokend" "${daemon_args[@]}"
row "waf-tokend, readiness.waitForToken: true" "≤ 12 ms median" "$bin/waf-tokend" "${daemon_args[@]}" --readiness-wait-for-token true
perf stat -x, -r 20 -e task-clock,page-faults -o "$work/perf.out" "$bin/waf-tokend" --version >/dev/null
awk -F, '$3 == "task-clock" {cpu = $1} $3 == "page-faults" {faults = $1}
    END {printf "waf-tokend --version (exec → exit): %.2f ms CPU, %d page faults\n", cpu, faults}' "$work/perf.out"
