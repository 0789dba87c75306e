#!/usr/bin/env bash
# The token-injecting proxy beside two anchors, in the same run: nginx (proxy_pass with a fixed
# Cookie header carrying the same token) and Go's net/http/httputil.ReverseProxy with a director
# that sets the cookie (Benchmarks/go-proxy, built here). All three listen on a Unix socket and go
# to the same upstream, a second nginx answering `return 200` on a loopback port, keep-alive on
# both sides. h2load (HTTP/1.1, keep-alive) at 16 and 64 connections, with one worker each
# (--proxy-threads 1, worker_processes 1, GOMAXPROCS=1) and with one per core. Each figure is
# the median of RUNS runs, the three alternating. With one worker also a fourth: the relay sketch
# (Benchmarks/waf-relay-sketch), an epoll loop of its own over the proxy's parsers without NIO's
# pipeline, doing only what the nginx anchor does: what leaving the pipeline would get. Also the
# daemon's memory at rest with the socket and the proxy on, before any load. Then the same rows
# with an HTTPS upstream, the path a WAF-protected API takes: the same nginx behind TLS with a
# certificate of a throw-away CA made here by openssl, TLS 1.2 with one cipher for every
# contender; the daemon trusts it through tokenService.caFile, nginx through proxy_ssl_verify; both keep
# connections alive, so handshakes are rare (nginx also reuses sessions, the daemon does not).
# Go sits these rows out; the sketch speaks TLS through OpenSSL's libssl, verifying as nginx does
# (what the proxy on a loop of its own would do, issue 39).
#
# Last, the instructions each spends per request, counted by callgrind (Benchmarks/proxy-instructions.sh).
#
#   Benchmarks/proxy-bench.sh        (RUNS=3 REQUESTS=100000 WORKERS="1 <cores>" CONNECTIONS="16 64" SCHEMES="http https" INSTRUCTIONS=1)
set -euo pipefail
cd "$(dirname "$0")/.."
source Benchmarks/lib.sh

RUNS=${RUNS:-3}
REQUESTS=${REQUESTS:-100000}
WORKERS=${WORKERS:-1 $(nproc)}
CONNECTIONS=${CONNECTIONS:-16 64}
SCHEMES=${SCHEMES:-http https}
bench_setup proxy
command -v nginx >/dev/null || { echo "error: nginx is missing (scripts/install-deps.sh bench installs it)" >&2; exit 1; }
command -v go >/dev/null || { echo "error: go is missing (scripts/install-deps.sh bench installs golang-go)" >&2; exit 1; }

build_release waf-tokend waf-token-service waf-relay-sketch
(cd Benchmarks/go-proxy && GOCACHE="$work/gocache" GOFLAGS=-mod=mod go build -o "$work/go-proxy" .)
start_service

nginx_on_port upstream 1 "    server { listen 127.0.0.1:@PORT@; location / { return 200 \"ok\\n\"; } }"
wait_for "curl -sf http://127.0.0.1:$port/"
plain_port=$port
# The HTTPS upstream: the same answer behind TLS, with a certificate for localhost of a CA made now.
tls=$work/tls
mkdir -p "$tls"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$tls/ca.key" -out "$tls/ca.pem" -days 1 \
    -subj "/CN=waf-tokend bench CA" 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$tls/server.key" -out "$tls/server.csr" \
    -subj "/CN=localhost" 2>/dev/null
printf 'subjectAltName=DNS:localhost\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n' >"$tls/ext"
openssl x509 -req -in "$tls/server.csr" -CA "$tls/ca.pem" -CAkey "$tls/ca.key" -CAcreateserial -out "$tls/server.pem" -days 1 \
    -extfile "$tls/ext" 2>/dev/null
nginx_on_port tls-upstream 1 "    server {
        listen 127.0.0.1:@PORT@ ssl;
        ssl_certificate $tls/server.pem;
        ssl_certificate_key $tls/server.key;
        ssl_protocols TLSv1.2;
        ssl_ciphers ECDHE-ECDSA-AES128-GCM-SHA256;
        keepalive_requests 1000000;
        location / { return 200 \"ok\\n\"; }
    }"
tls_port=$port
wait_for "curl -sf --cacert $tls/ca.pem https://localhost:$tls_port/"

for scheme in $SCHEMES; do
if [ "$scheme" = https ]; then
    upstream="https://localhost:$tls_port" trust=(--token-service-ca-file "$tls/ca.pem")
    nginx_upstream="proxy_pass https://waf;
            proxy_ssl_verify on;
            proxy_ssl_trusted_certificate $tls/ca.pem;
            proxy_ssl_server_name on;
            proxy_ssl_name localhost;
            proxy_ssl_session_reuse on;"
    echo
    echo "GET / through a proxy to nginx 'return 200' over TLS on localhost (a CA of this run): h2load --h1 -t 1 -n $REQUESTS, median of $RUNS runs"
else
    upstream="http://127.0.0.1:$plain_port" trust=()
    nginx_upstream="proxy_pass http://waf;"
    echo "GET / through a proxy to nginx 'return 200' on 127.0.0.1: h2load --h1 -t 1 -n $REQUESTS, median of $RUNS runs, $(nproc) cores"
fi
echo "waf-tokend --proxy-threads N; nginx $(nginx -v 2>&1 | sed 's/.*nginx\///') worker_processes N, proxy_pass, keepalive, a fixed Cookie; $(go version | cut -d' ' -f3) ReverseProxy, GOMAXPROCS=N"
printf "%-8s %-6s %12s %8s %12s %8s %12s %8s %9s %10s %9s %9s %6s %12s %9s\n" workers conns "waf-tokend" "p99 ms" "nginx" "p99 ms" "Go" "p99 ms" "vs nginx" \
    "runs" "p99 ratio" "vs Go" goal "sketch" "vs nginx"
for workers in $WORKERS; do
    dir=$work/$scheme-w$workers
    mkdir -p "$dir"
    start_daemon "$dir/token.sock" --state-directory "$dir" --proxy-listen "$dir/proxy.sock" --proxy-upstream "$upstream" --proxy-threads "$workers" \
        "${trust[@]}"
    ours_pid=$daemon
    sleep 1
    echo "waf-tokend at rest with the socket and a proxy of $workers thread(s): $(memory "$ours_pid")"
    token=$(curl -sf --unix-socket "$dir/token.sock" -H "Accept: text/plain" http://localhost/v1/token)
    nginx_config "front-$scheme$workers" "$workers" "    upstream waf { server 127.0.0.1:${upstream##*:}; keepalive 128; }
    server {
        listen unix:$dir/nginx.sock;
        location / {
            $nginx_upstream
            proxy_http_version 1.1;
            proxy_set_header Connection \"\";
            proxy_set_header Cookie \"aws-waf-token=$token\";
        }
    }"
    nginx_pid=${pids[-1]}
    contenders=(proxy nginx)
    go_pid=
    if [ "$scheme" = http ]; then
        GOMAXPROCS=$workers "$work/go-proxy" "$dir/go.sock" "$upstream" "$token" >"$dir/go.out" &
        pids+=($!)
        go_pid=$!
        wait_for "grep -q ready $dir/go.out"
        contenders+=(go)
    fi
    if [ "$workers" = 1 ]; then
        sketch_tls=()
        [ "$scheme" = https ] && sketch_tls=("$tls/ca.pem" localhost)
        "$bin/waf-relay-sketch" "$dir/sketch.sock" "$([ "$scheme" = https ] && echo "$tls_port" || echo "$plain_port")" "$token" "${sketch_tls[@]}" >"$dir/sketch.out" &
        pids+=($!)
        sketch_pid=$!
        wait_for "grep -q ready $dir/sketch.out"
        contenders+=(sketch)
    fi
    for socket in "${contenders[@]}"; do wait_for "curl -sf --unix-socket $dir/$socket.sock http://localhost/"; done
    for connections in $CONNECTIONS; do
        declare -A rows=()
        for socket in "${contenders[@]}"; do h2load_run "$dir/$socket.sock" "$connections" 20000 / >/dev/null; done   # warm-up
        for ((run = 0; run < RUNS; run++)); do
            for socket in "${contenders[@]}"; do rows[$socket]+="$(h2load_run "$dir/$socket.sock" "$connections" "$REQUESTS" /)"$'\n'; done
        done
        median() { median_row $(printf '%s' "${rows[$1]}" | tr ' ' '_') | tr '_' ' '; }
        read -r rate _ p99 <<<"$(median proxy)"
        read -r nrate _ np99 <<<"$(median nginx)"
        grate=- gp99=- gratio=-
        if [ -n "${rows[go]:-}" ]; then
            read -r grate _ gp99 <<<"$(median go)"
            gratio=$(awk -v a="$rate" -v b="$grate" 'BEGIN {printf "%.2fx", a / b}')
        fi
        srate=- sratio=-
        if [ -n "${rows[sketch]:-}" ]; then
            read -r srate _ _ <<<"$(median sketch)"
            sratio=$(awk -v a="$srate" -v b="$nrate" 'BEGIN {printf "%.2fx", a / b}')
        fi
        # The spread: the ratio of each run to nginx's run beside it (they alternate), lowest–highest.
        spread=$(paste <(printf '%s' "${rows[proxy]}" | awk '{print $1}') <(printf '%s' "${rows[nginx]}" | awk '{print $1}') |
            awk '$2 > 0 {r = $1 / $2; if (n == 0 || r < lo) lo = r; if (n == 0 || r > hi) hi = r; n++} END {printf "%.2f–%.2f", lo, hi}')
        printf "%-8s %-6s %12s %8s %12s %8s %12s %8s %8.2fx %10s %8.2fx %9s %6s %12s %9s\n" "$workers" "$connections" "$rate" "$p99" "$nrate" "$np99" "$grate" \
            "$gp99" "$(awk -v a="$rate" -v b="$nrate" 'BEGIN {print a / b}')" "$spread" "$(awk -v a="$p99" -v b="$np99" 'BEGIN {print a / b}')" \
            "$gratio" "≥1.05x" "$srate" "$sratio"
    done
    # CPU per request of each proxy (all its threads or processes), 16 connections.
    # With its split into user and system time: the kernel's share is much the same for all three
    # (the same four syscalls a request), what differs is the time in user space.
    cpu_per_request() {
        local before after ticks processes=("$1" $(pgrep -P "$1" || true))
        before=$(cpu_of "${processes[@]}")
        ticks=$(cpu_ticks "${processes[@]}")
        h2load_run "$2" 16 "$REQUESTS" / >/dev/null
        after=$(cpu_of "${processes[@]}")
        awk -v t="$((after - before))" -v n="$REQUESTS" 'BEGIN {printf "%.1f", t / 1000 / n}'
        echo " ($(user_system "$ticks" "$(cpu_ticks "${processes[@]}")" "$REQUESTS"))"
    }
    cpu_of() { local total=0; for pid in "$@"; do total=$((total + $(cpu_nanoseconds "$pid"))); done; echo "$total"; }
    sketch_cpu=
    [ -n "${sketch_pid:-}" ] && sketch_cpu=", sketch $(cpu_per_request "$sketch_pid" "$dir/sketch.sock")"
    go_cpu=
    [ -n "$go_pid" ] && go_cpu=", Go $(cpu_per_request "$go_pid" "$dir/go.sock")"
    echo "         CPU per request (µs, every thread or worker): waf-tokend $(cpu_per_request "$ours_pid" "$dir/proxy.sock")," \
        "nginx $(cpu_per_request "$nginx_pid" "$dir/nginx.sock")$go_cpu$sketch_cpu (goal: ≤ 1.0x nginx's)"
    kill "$ours_pid" "$nginx_pid" $go_pid ${sketch_pid:-} 2>/dev/null || true
    wait "$ours_pid" "$nginx_pid" $go_pid ${sketch_pid:-} 2>/dev/null || true
    sketch_pid=
done
done
[ "${INSTRUCTIONS:-1}" = 1 ] && source Benchmarks/proxy-instructions.sh
