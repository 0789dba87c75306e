#!/usr/bin/env bash
# The token-injecting proxy beside nginx, in the same run: h2load (HTTP/1.1, keep-alive) through
# waf-tokend's proxy, and through nginx with proxy_pass and a fixed Cookie header carrying the same
# token, to the same upstream (a second nginx answering `return 200` on a loopback port), keep-alive
# on both sides of both proxies. Both proxies listen on a Unix socket and use one worker per core.
# Each figure is the median of RUNS runs, the two alternating, at 16 and 64 connections.
#
#   Benchmarks/proxy-bench.sh        (RUNS=3 REQUESTS=100000 PROXY_THREADS=<cores>)
set -euo pipefail
cd "$(dirname "$0")/.."
source Benchmarks/lib.sh

RUNS=${RUNS:-3}
REQUESTS=${REQUESTS:-100000}
THREADS=${PROXY_THREADS:-$(nproc)}
bench_setup proxy
command -v nginx >/dev/null || { echo "error: nginx is missing (scripts/install-deps.sh bench installs it)" >&2; exit 1; }

build_release waf-tokend waf-token-service
start_service

# nginx unprivileged or as root, everything under $work. (As root its workers stay root here: they
# only read what the master opened.)
nginx_config() {
    local name=$1 body=$2
    mkdir -p "$work/$name"
    cat >"$work/$name/nginx.conf" <<EOF
$([ "$(id -u)" -eq 0 ] && echo "user root;")
worker_processes $THREADS;
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
    nginx -p "$work/$name" -c "$work/$name/nginx.conf" -g 'daemon off;' 2>>"$work/$name/error.log" &
    pids+=($!)
}

port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
nginx_config upstream "    server { listen 127.0.0.1:$port; location / { return 200 \"ok\\n\"; } }"
wait_for "curl -sf http://127.0.0.1:$port/"

start_daemon "$work/token.sock" --proxy-listen "$work/proxy.sock" --proxy-upstream "http://127.0.0.1:$port" --proxy-threads "$THREADS"
token=$(curl -sf --unix-socket "$work/token.sock" -H "Accept: text/plain" http://localhost/v1/token)

nginx_config front "    upstream waf { server 127.0.0.1:$port; keepalive 128; }
    server {
        listen unix:$work/nginx.sock;
        location / {
            proxy_pass http://waf;
            proxy_http_version 1.1;
            proxy_set_header Connection \"\";
            proxy_set_header Cookie \"aws-waf-token=$token\";
        }
    }"
wait_for "curl -sf --unix-socket $work/nginx.sock http://localhost/"
wait_for "curl -sf --unix-socket $work/proxy.sock http://localhost/"

echo "GET / through a proxy to nginx 'return 200' on 127.0.0.1, h2load --h1 -t 1, $REQUESTS requests per run, median of $RUNS runs, $(nproc) cores"
echo "waf-tokend: --proxy-threads $THREADS; nginx $(nginx -v 2>&1 | sed 's/.*nginx\///'): worker_processes $THREADS, proxy_pass with keepalive and a fixed Cookie"
printf "%-12s %14s %9s %9s %14s %9s %9s %9s %9s\n" connections "waf-tokend r/s" "p50 ms" "p99 ms" "nginx r/s" "p50 ms" "p99 ms" "r/s ratio" "p99 ratio"
for connections in 16 64; do
    h2load_run "$work/proxy.sock" "$connections" 20000 / >/dev/null   # warm-up
    h2load_run "$work/nginx.sock" "$connections" 20000 / >/dev/null
    ours=() theirs=()
    for ((run = 0; run < RUNS; run++)); do
        ours+=("$(h2load_run "$work/proxy.sock" "$connections" "$REQUESTS" /)")
        theirs+=("$(h2load_run "$work/nginx.sock" "$connections" "$REQUESTS" /)")
    done
    read -r rate p50 p99 <<<"$(median_row "${ours[@]}")"
    read -r rate2 p502 p992 <<<"$(median_row "${theirs[@]}")"
    printf "%-12s %14s %9s %9s %14s %9s %9s %8.2fx %8.2fx\n" "$connections" "$rate" "$p50" "$p99" "$rate2" "$p502" "$p992" \
        "$(awk -v a="$rate" -v b="$rate2" 'BEGIN {print a / b}')" "$(awk -v a="$p99" -v b="$p992" 'BEGIN {print a / b}')"
done
echo "the daemon after the runs: $(memory "$daemon")"
