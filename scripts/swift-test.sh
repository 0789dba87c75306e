#!/usr/bin/env bash
# `swift test` in a session of its own; afterwards every process still in that session is killed.
# A test process that crashes (or is killed at a deadline) leaves its child daemons and token
# services running, and some retry every 50 ms for ever: on a 2-core machine a handful of them
# disturbs every later test and benchmark.
#
#   scripts/swift-test.sh [swift test arguments...]
set -uo pipefail
# At most this many tests at once (Swift Testing's own limit, applied before a test's time limit
# starts). Unbounded, 300 tests on threads of their own, many polling, starved on two cores the
# daemons and token services they started: one took over 20 s to stop, fetches did not start.
export SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH=${SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH:-16}
setsid "${SWIFT:-swift}" test "$@" &
session=$!
# An interrupt reaches only this script's process group, not the session: pass it on.
watchdog=
trap 'pkill -KILL -s "$session" 2>/dev/null; [ -n "$watchdog" ] && kill "$watchdog" 2>/dev/null; exit 130' INT TERM
# A bound on the whole run: a test process whose crash handler cannot suspend its threads once
# printed "failed to suspend thread" for 15 minutes and would have held CI to its own limit.
# Each test has its own bound below this (WAFTestTraits); this one catches what none of them can.
deadline=${WAF_TEST_DEADLINE_SEC:-900}
if ! [[ $deadline =~ ^[0-9]+$ ]]; then
    echo "swift-test.sh: WAF_TEST_DEADLINE_SEC=$deadline is not a whole number of seconds" >&2
    pkill -KILL -s "$session" 2>/dev/null
    exit 2
fi
# The sleep holds none of this script's output: a caller reading it to its end (`$(…)`, a pipe)
# must not wait for the sleep once the run is over.
(
    sleeper=
    trap '[ -n "$sleeper" ] && kill "$sleeper" 2>/dev/null; exit 0' TERM
    sleep "$deadline" </dev/null >/dev/null 2>&1 &
    sleeper=$!
    # Anything but the sleep's own end (its kill above, or another's): no deadline passed.
    wait "$sleeper" || exit 0
    echo "swift-test.sh: swift test $* did not end within ${deadline} s (WAF_TEST_DEADLINE_SEC): killing it" >&2
    pkill -KILL -s "$session" 2>/dev/null
) &
watchdog=$!
wait "$session"
status=$?
kill "$watchdog" 2>/dev/null
pkill -KILL -s "$session" 2>/dev/null || true
exit "$status"
