# Shared by the benchmark scripts (sourced): a scratch folder cleaned up on exit with every process
# started, the release binaries, the local token service and a daemon, h2load runs and medians.

# bench_setup NAME: $work, $pids and the exit trap.
bench_setup() {
    work=$(mktemp -d "/tmp/waf-$1-bench.XXXXXX")
    pids=()
    trap 'for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$work"' EXIT
}

# wait_for COMMAND [SECONDS]: polls until COMMAND succeeds; fails the benchmark at the deadline.
wait_for() {
    local deadline=$((SECONDS + ${2:-30}))
    until eval "$1" >/dev/null 2>&1; do
        if ((SECONDS >= deadline)); then echo "error: gave up waiting for: $1" >&2; exit 1; fi
        sleep 0.05
    done
}

# build_release PRODUCT...: the binaries as installed (release, Swift runtime linked in); $bin.
build_release() {
    for product in "$@"; do
        scripts/swift-release.sh --product "$product" >"$work/build.log" 2>&1 || { cat "$work/build.log"; exit 1; }
    done
    bin=$(scripts/swift-release.sh --show-bin-path)
    # A binary the linker just wrote sits in dirty page-cache pages until written back, and a
    # process that maps them counts them as its own private dirty memory: write them back first.
    sync
}

# start_service [ARGS...]: the local token service; $url.
start_service() {
    "$bin/waf-token-service" "$@" >"$work/service.out" 2>/dev/null &
    pids+=($!)
    wait_for "grep -q '^listening on' $work/service.out"
    url=$(sed -n 's/^listening on //p' "$work/service.out")
}

# start_daemon SOCKET [ARGS...]: waf-tokend against $url, waited for until it serves a token; $daemon.
start_daemon() {
    local socket=$1
    shift
    "$bin/waf-tokend" --config /dev/null --application-integration-url "$url" --domain-name 127.0.0.1 \
        --socket-path "$socket" --log-level warning "$@" 2>"$work/daemon.err" &
    daemon=$!
    pids+=($daemon)
    wait_for "curl -sf --unix-socket $socket 'http://localhost/v1/token?wait=10' -o /dev/null"
}

# h2load_run SOCKET CONNECTIONS REQUESTS PATH [h2load options...]: prints "requests/s p50_ms p99_ms".
h2load_run() {
    local socket=$1 connections=$2 requests=$3 path=$4
    shift 4
    h2load --h1 -B "unix:$socket" -n "$requests" -c "$connections" -t 1 "$@" --log-file "$work/h2load.log" \
        "http://localhost$path" >"$work/h2load.out"
    if ! grep -q " 0 failed, 0 errored" "$work/h2load.out" || ! grep -q "^status codes: [0-9]* 2xx, 0 3xx, 0 4xx, 0 5xx" "$work/h2load.out"; then
        echo "error: h2load on $socket$path did not get only 2xx answers:" >&2
        grep -E "^requests:|^status codes:" "$work/h2load.out" >&2
        exit 1
    fi
    local rate
    rate=$(sed -n 's/^finished in [^,]*, \([0-9.]*\) req\/s.*/\1/p' "$work/h2load.out")
    python3 - "$work/h2load.log" "$rate" <<'PY'
import sys
latencies = sorted(int(line.split("\t")[2]) for line in open(sys.argv[1]) if line.count("\t") >= 2)
def percentile(p): return latencies[min(len(latencies) - 1, int(len(latencies) * p))] / 1000
print(f"{float(sys.argv[2]):.0f} {percentile(0.50):.3f} {percentile(0.99):.3f}")
PY
}

# median_row ROW...: of rows "requests/s p50 p99", the one with the median requests/s.
median_row() {
    printf '%s\n' "$@" | sort -n -k1,1 | awk '{row[NR] = $0} END {print row[int((NR + 1) / 2)]}'
}

# memory PID: RSS and PSS, and what of it is the process's own (private) rather than shared pages.
memory() {
    awk '/^Rss:/ {r=$2} /^Pss:/ {p=$2} /^Private_Clean:/ {pc=$2} /^Private_Dirty:/ {pd=$2} /^Shared_Clean:/ {sc=$2}
         END {printf "RSS %.1f MiB, PSS %.1f MiB: private dirty %.1f MiB, private clean %.1f MiB, shared clean %.1f MiB", r/1024, p/1024, pd/1024, pc/1024, sc/1024}' \
        "/proc/$1/smaps_rollup"
}

# idle_wakeups PID SECONDS: the context switches of PID's threads over SECONDS, as "TOTAL (per
# thread: NAME COUNT, ...)". A thread that ends meanwhile (an idle pool thread) is left out: what
# wakes periodically lives on.
idle_wakeups() {
    local sample=$work/switches
    switches() {
        for task in /proc/"$1"/task/*; do
            printf '%s %s %s\n' "${task##*/}" "$(tr ' ' _ <"$task/comm")" \
                "$(awk '/^voluntary_ctxt_switches|^nonvoluntary_ctxt_switches/ {sum += $2} END {print sum}' "$task/status")"
        done
    }
    switches "$1" >"$sample.before"
    sleep "$2"
    switches "$1" >"$sample.after"
    awk 'NR == FNR {before[$1] = $3; next}
         {delta = $3 - before[$1]; total += delta; if (delta) threads = threads sprintf("%s%s %d", threads ? ", " : "", $2, delta)}
         END {printf "%d (%s)\n", total, threads ? threads : "no thread woke"}' "$sample.before" "$sample.after"
}

# perf_counts PID COMMAND...: runs COMMAND while perf counts PID's CPU time (ms) and syscalls
# (all threads); prints "CPU_MS SYSCALLS". perf, unlike strace, barely slows the process counted.
perf_counts() {
    local pid=$1 out=$work/perf.csv
    shift
    perf stat -x, -e task-clock,raw_syscalls:sys_enter -p "$pid" -o "$out" &
    local counter=$!
    sleep 0.3
    "$@" >/dev/null
    kill -INT "$counter"
    wait "$counter" 2>/dev/null || true
    awk -F, '$3 == "task-clock" {cpu = $1} $3 == "raw_syscalls:sys_enter" {calls = $1} END {printf "%s %s", cpu, calls}' "$out"
}

# cpu_nanoseconds PID: the time all its threads have run, in nanoseconds.
cpu_nanoseconds() {
    cat /proc/"$1"/task/*/schedstat | awk '{sum += $1} END {printf "%.0f", sum}'
}

# cpu_ticks PID...: the user and the system time of these processes (every thread, live or gone),
# in clock ticks, as "USER SYSTEM". The command name may hold spaces: fields are counted after it.
cpu_ticks() {
    for pid in "$@"; do sed 's/.*) //' /proc/"$pid"/stat; done | awk '{u += $12; s += $13} END {print u, s}'
}

# user_system BEFORE AFTER REQUESTS: "user U, system S" in µs per request, from two cpu_ticks.
user_system() {
    read -r u0 s0 <<<"$1"
    read -r u1 s1 <<<"$2"
    awk -v u="$((u1 - u0))" -v s="$((s1 - s0))" -v n="$3" -v hz="$(getconf CLK_TCK)" \
        'BEGIN {printf "user %.1f, system %.1f", u * 1e6 / hz / n, s * 1e6 / hz / n}'
}

# nginx_config NAME WORKERS BODY: an nginx with BODY in its http block, unprivileged or as root,
# everything under $work/NAME; its pid is ${pids[-1]}. (As root its workers stay root here: they
# only read what the master opened.)
nginx_config() {
    nginx_write_config "$1" "$2" "$3" "$work/$1/nginx.conf"
    nginx -p "$work/$1" -c "$work/$1/nginx.conf" -g 'daemon off;' 2>>"$work/$1/error.log" &
    pids+=($!)
}

# nginx_on_port NAME WORKERS BODY: nginx_config with @PORT@ in BODY a loopback port the system
# chose, bound before nginx starts and passed to it (Benchmarks/nginx-on-port.py): never a port
# picked as free that something else can take before nginx binds it. Sets port.
nginx_on_port() {
    local name=$1
    nginx_write_config "$name" "$2" "$3" "$work/$name/nginx.conf.in"
    python3 Benchmarks/nginx-on-port.py "$work/$name/nginx.conf.in" "$work/$name/nginx.conf" "$work/$name/port" -- \
        nginx -p "$work/$name" -c "$work/$name/nginx.conf" -g 'daemon off;' 2>>"$work/$name/error.log" &
    pids+=($!)
    wait_for "test -s $work/$name/port"
    port=$(cat "$work/$name/port")
}

# nginx_write_config NAME WORKERS BODY FILE: the configuration nginx_config runs.
nginx_write_config() {
    local name=$1 workers=$2 body=$3
    mkdir -p "$work/$name"
    cat >"$4" <<EOF
$([ "$(id -u)" -eq 0 ] && echo "user root;")
worker_processes $workers;
pid $work/$name/nginx.pid;
error_log $work/$name/error.log warn;
events { worker_connections 4096; }
http {
    access_log off;
    client_body_temp_path $work/$name/body;
    proxy_temp_path $work/$name/proxy;
    fastcgi_temp_path $work/$name/fastcgi;
    uwsgi_temp_path $work/$name/uwsgi;
    scgi_temp_path $work/$name/scgi;
    keepalive_requests 1000000;
$body
}
EOF
}

