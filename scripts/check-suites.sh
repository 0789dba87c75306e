#!/usr/bin/env bash
# Every test suite wears the `.offPool` trait (WAFTestTraits/OffPool.swift): off the concurrency
# pool, watched for a blocked pool, within a bound. A suite without it, or a test outside a suite,
# would run on the pool again. Run by `make test`.
set -euo pipefail
cd "$(dirname "$0")/.."
status=0
while IFS= read -r line; do
    echo "a suite without .offPool: $line" >&2
    status=1
done < <(grep -rn --include='*.swift' '@Suite(' Tests | grep -v '\.offPool' || true)
for file in $(grep -rl --include='*.swift' '@Test' Tests); do
    if ! grep -q '@Suite(' "$file"; then
        echo "tests outside a suite (so without .offPool): $file" >&2
        status=1
    fi
done
# Every test thread starts through startThread (WAFTestTraits/OwnThread.swift), which lets go of
# what its body captured before the thread ends: a provider released by a thread-exit destructor
# corrupted the heap (docs/development.md, "The heap corruption of issue 36"). The proxy's loops
# are the one exception: their threads run for the proxy's life, hand pthread_create a loop (no
# closure to let go of), and end by a join, never by an exit destructor that frees what they hold.
# So is the start's conformance warm-up (WAFStartupWarmup): its thread takes its box back, and
# lets go of it and of the closure it holds before its body returns. And the thread that makes NIO's
# singleton loops ahead of the start (WAFEventLoopExecutor): a C function with nothing captured,
# which touches neither libdispatch nor a provider.
while IFS= read -r line; do
    echo "a thread started without startThread: $line" >&2
    status=1
done < <(grep -rnE --include='*.swift' 'Thread\.detachNewThread|Thread\.init|(^|[^A-Za-z])Thread *[({]|:[[:space:]]*Thread\b|pthread_create' Sources Tests \
    | grep -v '^Sources/WAFTestTraits/OwnThread.swift:' \
    | grep -v '^Sources/WAFProxyLoop/LoopThread.swift:' \
    | grep -v '^Sources/WAFStartupWarmup/ConformanceWarmup.swift:[0-9]*: *let started = pthread_create($' \
    | grep -v '^Sources/WAFEventLoopExecutor/EventLoopTaskExecutor.swift:[0-9]*: *let created = pthread_create($' \
    | grep -v '^Sources/WAFTestTraits/PoolWatcher.swift:.*let thread = Thread { \[self\] in' || true)
[ $status -eq 0 ] && echo "suites: $(grep -rh --include='*.swift' '@Suite(' Tests | wc -l) with .offPool"
exit $status
