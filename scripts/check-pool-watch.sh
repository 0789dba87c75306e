#!/usr/bin/env bash
# Shows that the pool watcher fires (WAFTestTraits/PoolWatcher.swift): a test that blocks every
# thread of the concurrency pool on purpose must fail, naming itself. Run alone, since it would
# fail every test beside it. Part of `make test`; needs the test build.
set -euo pipefail
cd "$(dirname "$0")/.."
SWIFT=${SWIFT:-swift}
output=$(WAF_POOL_WATCH_SELFTEST=1 "$SWIFT" test --skip-build --filter 'PoolWatcherTests/blockingThePoolFails' 2>&1) && status=0 || status=$?
if [ "$status" -ne 0 ] && grep -q 'the concurrency pool was blocked for .* Running then: the watcher fails a test that blocks the pool' <<<"$output"; then
    echo "pool watcher: a test that blocked the pool failed, naming itself"
    exit 0
fi
echo "error: the pool watcher did not fail a test that blocked the concurrency pool (exit $status):" >&2
tail -20 <<<"$output" >&2
exit 1
