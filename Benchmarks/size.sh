#!/usr/bin/env bash
# Sizes and memory, as installed: the release binaries (Swift runtime linked in) before and after
# strip, what each module costs in them (scripts/module-sizes.py), and the stripped daemon's memory
# idle and while 16 clients read tokens over the socket (RSS, PSS, private).
#
#   Benchmarks/size.sh        (LOAD_SECONDS=10)
set -euo pipefail
cd "$(dirname "$0")/.."
source Benchmarks/lib.sh

LOAD_SECONDS=${LOAD_SECONDS:-10}
bench_setup size
build_release waf-tokend waf-tokenctl waf-token-service

mib() { awk -v b="$1" 'BEGIN {printf "%.2f MB", b / 1e6}'; }
printf "%-20s %14s %14s %10s\n" binary unstripped stripped goal
declare -A goal=([waf-tokend]="35 MB" [waf-tokenctl]="10 MB" [waf-token-service]="-")
for binary in waf-tokend waf-tokenctl waf-token-service; do
    strip -o "$work/$binary" "$bin/$binary"
    sync "$work/$binary"   # else its pages are dirty page cache, and count as the daemon's private dirty memory
    printf "%-20s %14s %14s %10s\n" "$binary" "$(mib "$(stat -c %s "$bin/$binary")")" "$(mib "$(stat -c %s "$work/$binary")")" "${goal[$binary]}"
done
for binary in waf-tokend waf-tokenctl; do
    echo "what the modules of $binary cost (sizes of their symbols):"
    python3 scripts/module-sizes.py "$bin/$binary" 14
done
echo "shared libraries of waf-tokend: $(ldd "$work/waf-tokend" | awk '$1 !~ /linux-vdso|ld-linux/ {printf "%s ", $1}')"

bin=$work   # the daemon as installed: stripped
start_service
start_daemon "$work/token.sock"
sleep 1
echo "waf-tokend idle with a token: $(memory "$daemon")"
h2load --h1 -B "unix:$work/token.sock" -c 16 -t 1 -D "$LOAD_SECONDS" http://localhost/v1/token >"$work/h2load.out" &
load=$!
sleep $((LOAD_SECONDS / 2))
during=$(memory "$daemon")
wait "$load"
echo "waf-tokend while 16 clients read tokens ($(sed -n 's/^finished in [^,]*, \([0-9.]*\) req\/s.*/\1/p' "$work/h2load.out") requests/s): $during"
