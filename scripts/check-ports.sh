#!/usr/bin/env bash
# No test or benchmark picks a "free" TCP port and hopes it is still free when the server binds
# it: another test can take it in between, and the test then talks to the wrong peer (a flake that
# failed one full run in five). A server under test binds port 0 and reports its port (the
# daemon's log line, `listeningPort(of:)` for a third-party program), or the test binds the socket
# itself and passes it (`ListeningSocket`); squid, which takes neither, gets an address of its own
# and a port outside the ephemeral range (`Squid`). Run by `make test`; prints what it finds.
set -euo pipefail
cd "$(dirname "$0")/.."

# A port learned from a socket that is then closed: the pattern, by its usual names and shape.
pattern='freePort|free_port|find_free_port|getFreePort|print\(.*getsockname\(\)\[1\]\)'
found=$(grep -rnE "$pattern" Tests Sources/WAFTestSupport Benchmarks scripts \
    --include='*.swift' --include='*.sh' --include='*.py' | grep -v '^scripts/check-ports.sh:' || true)
if [ -n "$found" ]; then
    echo "a port picked as free and bound later (bind port 0 and read the port back instead):" >&2
    echo "$found" >&2
    exit 1
fi
echo "ports: no test or benchmark picks a free port and hopes"
