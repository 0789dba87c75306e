#!/usr/bin/env bash
# How long a newcomer waits from the README to a token: clones this repository afresh, runs
# `make demo` as the README says, and stops the clock when a client first reads a token from the
# demo's socket. Prints the time, then stops the demo and removes the clone.
#
#   scripts/time-readme.sh
set -euo pipefail
cd "$(dirname "$0")/.."
clone=$(mktemp -d /tmp/waf-readme.XXXXXX)
log=$clone.log
trap 'pkill -INT -f "waf-tokend --demo" 2>/dev/null || true; sleep 1; rm -rf "$clone" "$log"' EXIT
git clone -q . "$clone"
start=$(date +%s.%N)
(cd "$clone" && make demo >"$log" 2>&1) &
demo=$!
until curl -sf --max-time 2 --unix-socket /tmp/waf-tokend-demo/token.sock http://localhost/v1/token -o /dev/null 2>/dev/null; do
    kill -0 "$demo" 2>/dev/null || { echo "error: make demo ended before serving a token:" >&2; tail -20 "$log" >&2; exit 1; }
    sleep 0.5
done
end=$(date +%s.%N)
awk -v s="$start" -v e="$end" 'BEGIN {t = e - s; printf "README to a token: %d min %d s (make demo on a fresh clone, to the first token read)\n", t / 60, t % 60}'
