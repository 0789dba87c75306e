#!/usr/bin/env bash
# The protocol conformance checks a start asks the Swift runtime before READY=1, in order, each
# once: the list WAFStartupWarmup's DaemonChecks.swift holds (docs/decisions.md, "The start's
# conformance warm-up"). Runs the release daemon with a token in its state directory under gdb,
# with a breakpoint on each of the runtime's conformance entry points that prints the type's and
# the protocol's names, until sd_notify. A check the list lacks is a start asking on its own path;
# a check of the list that no longer appears here is the warm-up's time wasted, not a fault. The
# release build reaches concrete generic types by their metadata accessors (scripts/swift-release.sh):
# 12 checks (NIO pipeline's 8 dynamic casts, 3 of the standard library's, and the server channel's
# generic superclass found by name); by mangled names (a debug build, or the release before) 40.
#
#   Benchmarks/conformance-checks.sh        (needs gdb: apt-get install gdb)
set -euo pipefail
cd "$(dirname "$0")/.."
source Benchmarks/lib.sh
command -v gdb >/dev/null || { echo "error: gdb is not installed (apt-get install gdb)" >&2; exit 1; }

bench_setup conformance
build_release waf-tokend waf-token-service
start_service
mkdir "$work/state"
start_daemon "$work/token.sock" --state-directory "$work/state"
kill -TERM "$daemon"
wait "$daemon" 2>/dev/null || true

# The type's name from its nominal type descriptor (classes at +40, structs, enums and optionals
# at +8 of the metadata; the name a relative pointer at +8 of the descriptor), the protocol's
# from its descriptor.
breakpoint() {
    cat <<GDB
break $1
commands
silent
set \$p = (char*)\$rsi + 8
set \$n = \$p + *(int*)\$p
set \$k = *(long*)\$rdi
set \$d = 0
if \$k == 0
  set \$d = *(char**)((char*)\$rdi + 40)
end
if \$k >= 0x200 && \$k <= 0x202
  set \$d = *(char**)((char*)\$rdi + 8)
end
if \$d != 0
  set \$q = \$d + 8
  printf "CHECK %s : %s\\n", \$q + *(int*)\$q, \$n
else
  printf "CHECK (metadata kind 0x%lx) : %s\\n", \$k, \$n
end
continue
end
GDB
}
{
    printf 'set pagination off\nset confirm off\nset print thread-events off\n'
    for entry in swift_conformsToProtocolCommon swift_conformsToProtocolWithExecutionContext swift_conformsToProtocol; do
        breakpoint "$entry"
    done
    printf 'break sd_notify\ncommands\nsilent\nprintf "READY\\n"\nkill\nquit\nend\nrun\n'
} >"$work/gdb.commands"
# On one CPU, where the warm-up does not start: its own checks would be listed among the start's.
timeout 300 taskset -c 0 gdb -q -batch -x "$work/gdb.commands" --args "$bin/waf-tokend" --config /dev/null --application-integration-url "$url" \
    --domain-name 127.0.0.1 --socket-path "$work/token.sock" --state-directory "$work/state" --log-level warning \
    >"$work/gdb.out" 2>/dev/null || true
grep -q '^READY' "$work/gdb.out" || { echo "error: the daemon did not reach READY=1 under gdb" >&2; exit 1; }
echo "the checks of a start, in order, each once (the first at each; later ones are the runtime's cache):"
sed -n '/^READY/q; s/^CHECK //p' "$work/gdb.out" | awk '!seen[$0]++' | nl -w2 -s'  '
