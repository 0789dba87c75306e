#!/usr/bin/env bash
# Several providers in one daemon (docs/performance.md, "Several providers: measured"): 1, 10 and 100 providers
# against the local token service, each its own domain (pN.example.org). Prints
#   - private memory (Private_Dirty) per provider: (100 providers − 1) / 99;
#   - exec → READY=1 with every provider's fresh token restored, 1 against 100 providers;
#   - token reads/s through ?provider= on the 100-provider daemon against /v1/token on a
#     one-provider daemon, alternating, medians of three;
#   - 100 providers refreshing at once: fetches per provider, the service's calls in flight, and
#     how long a read of a provider that is not refreshing takes meanwhile (max and p99).
#
#   Benchmarks/providers-bench.sh        (REQUESTS=100000 RUNS=3)
set -euo pipefail
cd "$(dirname "$0")/.."
source Benchmarks/lib.sh

REQUESTS=${REQUESTS:-100000}
RUNS=${RUNS:-3}
bench_setup providers
build_release waf-tokend waf-token-service
start_service --token-domain example.org --difficulty 16

# config N DIR: N providers p0…p(N-1) and a quiet one, q, that the storm leaves alone.
config() {
    local count=$1 directory=$2
    mkdir -p "$directory/state"
    {
        echo "socket:"
        echo "  path: $directory/token.sock"
        echo "stateDirectory: $directory/state"
        echo "log:"
        echo "  level: warning"
        echo "refresh:"
        echo "  jitter: false"
        echo "providers:"
        for ((index = 0; index < count; index++)); do
            printf '  p%d:\n    applicationIntegrationUrl: %s\n    domainName: p%d.example.org\n' "$index" "$url" "$index"
        done
        printf '  q:\n    applicationIntegrationUrl: %s\n    domainName: q.example.org\n' "$url"
    } > "$directory/waf-tokend.yaml"
}

# run_daemon DIR: a daemon of that configuration, waited for until every provider has a token.
run_daemon() {
    "$bin/waf-tokend" --config "$1/waf-tokend.yaml" 2>"$1/daemon.err" &
    daemon=$!
    pids+=($daemon)
    wait_for "curl -sf --unix-socket $1/token.sock http://localhost/readyz -o /dev/null" 120
}

echo "several providers on one daemon, $(nproc) cores, the local token service (difficulty 16: a proof of work of about 65,000 hashes a token)"
declare -A private
for count in 1 10 100; do
    config "$count" "$work/n$count"
    run_daemon "$work/n$count"
    sleep 1
    private[$count]=$(awk '/^Private_Dirty:/ {print $2}' "/proc/$daemon/smaps_rollup")
    echo "  $((count + 1)) providers: $(memory "$daemon")"
    if [ "$count" != 100 ]; then kill -TERM "$daemon"; wait "$daemon" 2>/dev/null || true; fi
done
hundred=$daemon
per=$(( (private[100] - private[1]) / 99 ))
echo "private memory per provider: $per KiB (goal ≤ 256 KiB)"

# Reads: ?provider= on the 101-provider daemon against a one-provider daemon's plain /v1/token.
mkdir -p "$work/single"
start_daemon "$work/single/token.sock"
many=() one=()
for ((run = 1; run <= RUNS; run++)); do
    one+=("$(h2load_run "$work/single/token.sock" 16 "$REQUESTS" /v1/token)")
    many+=("$(h2load_run "$work/n100/token.sock" 16 "$REQUESTS" "/v1/token?provider=p50")")
done
one_row=$(median_row "${one[@]}") many_row=$(median_row "${many[@]}")
printf 'token reads, 16 connections, medians of %d: one provider %s req/s (p99 %s ms), ?provider=p50 of 101 %s req/s (p99 %s ms): %.2fx (goal ≥ 0.95x)\n' \
    "$RUNS" $(cut -d' ' -f1,3 <<<"$one_row") $(cut -d' ' -f1,3 <<<"$many_row") "$(awk -v a="${many_row%% *}" -v b="${one_row%% *}" 'BEGIN {print a / b}')"

# The storm: every pN refreshed at once; reads of q meanwhile.
cat > "$work/reads.py" <<'PY'
# q's token over one kept-alive connection for SECONDS, each answer timed: "start_time latency_ms".
# Kept in memory and printed at the end: printing as it goes would fill the pipe to the parent,
# which reads only afterwards, and the reader would stop while the storm runs.
import socket, sys, time
path, seconds = sys.argv[1], float(sys.argv[2])
s = socket.socket(socket.AF_UNIX); s.connect(path)
end = time.time() + seconds
timed = []
while time.time() < end:
    start = time.time()
    s.sendall(b"GET /v1/token?provider=q HTTP/1.1\r\nHost: x\r\n\r\n")
    data = b""
    while b"\r\n\r\n" not in data or len(data) < data.index(b"\r\n\r\n") + 4 + int(data.split(b"Content-Length: ")[1].split(b"\r\n")[0]):
        data += s.recv(65536)
    timed.append((start, (time.time() - start) * 1000))
print("\n".join(f"{at:.6f} {latency:.3f}" for at, latency in timed))
PY
python3 - "$work/n100/token.sock" 100 "$work/reads.py" <<'PY'
import json, socket, subprocess, sys, threading, time
path, count, reads = sys.argv[1], int(sys.argv[2]), sys.argv[3]
def ask(method, target):
    s = socket.socket(socket.AF_UNIX); s.connect(path)
    s.sendall(f"{method} {target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
    data = b""
    while chunk := s.recv(65536): data += chunk
    s.close()
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split()[1]), body
def attempts():
    status = json.loads(ask("GET", "/v1/status")[1])
    return {name: p["counters"]["fetchAttempts"] for name, p in status["providers"].items()}
# The reader is a process of its own, at real-time priority: it shares no interpreter lock with
# the hundred requests and waits for no CPU, so what it measures is the daemon's answer time.
reader = subprocess.Popen(["chrt", "-f", "50", sys.executable, reads, path, "6"], stdout=subprocess.PIPE, text=True)
time.sleep(1)
asked = time.time()
before = attempts()
start = time.time()
threads = [threading.Thread(target=ask, args=("POST", f"/v1/refresh?provider=p{i}&wait=60")) for i in range(count)]
for thread in threads: thread.start()
for thread in threads: thread.join()
end = time.time()
after = attempts()
timed = [tuple(map(float, line.split())) for line in reader.communicate()[0].split("\n") if line]
quiet = sorted(latency for at, latency in timed if at + latency / 1000 < start - 0.05)
during = sorted(latency for at, latency in timed if at + latency / 1000 >= start and at <= end)
per = sorted(after[f"p{i}"] - before[f"p{i}"] for i in range(count))
if not timed or timed[-1][0] < end: sys.exit(f"error: the reader's reads ended before the refreshes did ({len(timed)} reads)")
p99 = lambda values: values[min(len(values) - 1, int(len(values) * 0.99))] if values else float("nan")
print(f"(the status of 101 providers took {(start - asked) * 1000:.0f} ms)")
print(f"100 providers refreshing at once: all done in {end - start:.2f} s; fetches per provider {per[0]}…{per[-1]} (one each: none overlapped)")
print(f"  q's reads (another process, one kept-alive connection) before: p99 {p99(quiet):.2f} ms, max {max(quiet or [0]):.2f} ms; "
      f"during the refreshes ({len(during)} reads): p99 {p99(during):.2f} ms, max {max(during or [0]):.2f} ms (goal: none delayed by more than 5 ms)")
PY
curl -s "$(sed -E 's#^(https?://[^/]+).*#\1#' <<<"$url")/__admin/counters" \
    | python3 -c 'import json, sys; most = json.load(sys.stdin)["maxCallsInFlight"]; print(f"the service saw at most {most} calls in flight")'

# Start-up with 101 restored fresh tokens against one.
kill -TERM "$hundred"; wait "$hundred" 2>/dev/null || true
config 0 "$work/n0"
run_daemon "$work/n0"
kill -TERM "$daemon"; wait "$daemon" 2>/dev/null || true
python3 Benchmarks/startup.py 3 "$bin/waf-tokend" --config "$work/n100/waf-tokend.yaml" >/dev/null
echo "exec → READY=1 with every token restored, 20 runs; milliseconds (median p10 p90)"
echo "  1 provider:    $(python3 Benchmarks/startup.py 20 "$bin/waf-tokend" --config "$work/n0/waf-tokend.yaml")"
echo "  101 providers: $(python3 Benchmarks/startup.py 20 "$bin/waf-tokend" --config "$work/n100/waf-tokend.yaml")  (goal ≤ 2x)"
