#!/usr/bin/env bash
# Shows that the test run's watchers fire (WAFTestTraits), each with a test that breaks the rule
# on purpose, run alone since it would fail every test beside it. Part of `make test`; needs the
# test build. The second stops its run with a daemon running: swift-test.sh ends what it left.
#   - the pool watcher (PoolWatcher.swift): a test that blocks every thread of the concurrency pool
#     must fail, naming itself;
#   - the bound alarm (BoundAlarm.swift): a test that outlives its bound stops the run, naming
#     itself and printing the last lines of the daemon it started, so that CI's log alone says why.
set -euo pipefail
cd "$(dirname "$0")/.."
SWIFT=${SWIFT:-swift}

output=$(WAF_POOL_WATCH_SELFTEST=1 "$SWIFT" test --skip-build --filter 'PoolWatcherTests/blockingThePoolFails' 2>&1) && status=0 || status=$?
if [ "$status" -ne 0 ] && grep -q 'the concurrency pool was blocked for .* Running then: the watcher fails a test that blocks the pool' <<<"$output"; then
    echo "pool watcher: a test that blocked the pool failed, naming itself"
else
    echo "error: the pool watcher did not fail a test that blocked the concurrency pool (exit $status):" >&2
    tail -20 <<<"$output" >&2
    exit 1
fi

output=$(WAF_BOUND_SELFTEST=1 WAF_TEST_BOUND_SECONDS=5 SWIFT="$SWIFT" scripts/swift-test.sh --skip-build --filter 'StoppedRunReportTests' 2>&1) && status=0 || status=$?
if [ "$status" -ne 0 ] && grep -q 'did not end within its bound' <<<"$output" && grep -q 'waf-tokend, pid [0-9]*, in .*: its last lines' <<<"$output" \
    && grep -q '| .*serving the token API' <<<"$output"; then
    echo "bound alarm: a test that outlived its bound stopped the run, printing its daemon's last lines"
else
    echo "error: a test that outlived its bound did not stop the run with its daemon's last lines (exit $status):" >&2
    tail -30 <<<"$output" >&2
    exit 1
fi
