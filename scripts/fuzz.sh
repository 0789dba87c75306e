#!/usr/bin/env bash
# make fuzz: builds the libFuzzer targets of Fuzz/ with AddressSanitizer and runs each for
# FUZZ_SECONDS (default 60) on a copy of its committed seed corpus. Prints executions, executions
# per second and coverage per target; fails on any finding, or when a target ran uninstrumented.
#
#   FUZZ_SECONDS=600 FUZZ_TARGETS="fuzz-socket fuzz-config" scripts/fuzz.sh
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${FUZZ_SECONDS:-60}
targets=${FUZZ_TARGETS:-"fuzz-socket fuzz-config fuzz-challenge fuzz-state fuzz-cookie-path fuzz-sse fuzz-local-service fuzz-relay"}
scratch=.build-fuzz
# The Swift driver keeps only the last of two -sanitize= flags, so SwiftPM's two left the Swift
# modules without coverage (libFuzzer: "no interesting inputs"); one combined flag instruments them.
flags=(--package-path Fuzz --scratch-path "$scratch" --sanitize=fuzzer --sanitize=address -Xswiftc -sanitize=fuzzer,address)
work=${FUZZ_WORK:-$(mktemp -d /tmp/waf-fuzz.XXXXXX)}
mkdir -p "$work"
export SWIFT_BACKTRACE=enable=no   # a crash must not leave the backtracer holding the terminal

build() { swift build "${flags[@]}" >"$work/build.log" 2>&1 || { tail -40 "$work/build.log"; exit 1; }; }
build
bin=$(swift build "${flags[@]}" --show-bin-path)

# One run; returns libFuzzer's status. The log is kept beside the corpus.
run() {
    local target=$1
    mkdir -p "$work/$target/corpus" "$work/$target/artifacts"
    "$bin/$target" "$work/$target/corpus" "Fuzz/corpus/$target" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
        -print_final_stats=1 -artifact_prefix="$work/$target/artifacts/" >"$work/$target/log" 2>&1
}

failed=0
printf '%-20s %12s %10s %8s %8s  %s\n' target executions "exec/s" cov ft result
for target in $targets; do
    status=0
    run "$target" || status=$?
    # A first build in a fresh folder has left the Swift modules uninstrumented here before: no
    # coverage on the INITED line. Building again fixed it; an uninstrumented run is a failure.
    if ! grep -q 'INITED cov:' "$work/$target/log"; then
        touch Fuzz/Sources/"$target"/*.swift
        build
        status=0
        run "$target" || status=$?
    fi
    log="$work/$target/log"
    executions=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
    cov=$(grep -oE 'cov: [0-9]+' "$log" | tail -1 | cut -d' ' -f2 || true)
    ft=$(grep -oE 'ft: [0-9]+' "$log" | tail -1 | cut -d' ' -f2 || true)
    result=ok
    if ! grep -q 'INITED cov:' "$log"; then
        result="UNINSTRUMENTED (no cov: on the INITED line)"
        failed=1
    elif [ "$status" -ne 0 ] || ls "$work/$target/artifacts/"* >/dev/null 2>&1; then
        result="FINDING: $(ls "$work/$target/artifacts/" | tr '\n' ' ')(log: $log)"
        grep -m3 -E 'property violated|ERROR: AddressSanitizer|Fatal error|deadly signal' "$log" | sed 's/^/    /' || true
        failed=1
    fi
    printf '%-20s %12s %10s %8s %8s  %s\n' "$target" "${executions:-?}" "${rate:-?}" "${cov:-?}" "${ft:-?}" "$result"
done
echo "each target ran ${seconds} s; corpora and logs in $work"
exit $failed
