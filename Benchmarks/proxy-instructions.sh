#!/usr/bin/env bash
# The proxy's user-space instructions per request beside nginx's, counted by callgrind: a figure
# that does not move with the machine's speed or load (the same binaries and inputs give the same
# count within a fraction of a per cent), where a rate on a shared two-core machine moves by a
# fifth from run to run. One worker each, 16 connections, the same upstream (nginx `return 200`):
# waf-tokend's proxy, nginx (proxy_pass, a fixed Cookie, master_process off so that callgrind
# watches the worker) and the relay sketch. Only instructions run after the warm-up are counted
# (callgrind_control switches the count on and off around the measured run). Sourced by
# Benchmarks/proxy-bench.sh, which has set up $work, $bin, $url and nginx_on_port.
#
#   INSTRUCTION_REQUESTS=20000
command -v valgrind >/dev/null || { echo "error: valgrind is missing (scripts/install-deps.sh bench installs it)" >&2; exit 1; }
requests=${INSTRUCTION_REQUESTS:-20000}
nginx_on_port counted-upstream 1 "    server { listen 127.0.0.1:@PORT@; location / { return 200 \"ok\\n\"; } }"
wait_for "curl -sf http://127.0.0.1:$port/"
counted=$work/counted
mkdir -p "$counted"
# callgrind reads a binary's symbols but not the DWARF 5 that the toolchain writes: copies without it.
strip --strip-debug -o "$counted/waf-tokend" "$bin/waf-tokend"
strip --strip-debug -o "$counted/waf-relay-sketch" "$bin/waf-relay-sketch"
token=aws-waf-token-of-the-instruction-count
cat >"$counted/nginx.conf" <<CONF
daemon off; master_process off; worker_processes 1; error_log $counted/nginx-error.log; pid $counted/nginx.pid;
events { worker_connections 1024; }
http {
    access_log off;
    client_body_temp_path $counted; proxy_temp_path $counted; fastcgi_temp_path $counted; uwsgi_temp_path $counted; scgi_temp_path $counted;
    upstream waf { server 127.0.0.1:$port; keepalive 128; }
    server {
        listen unix:$counted/nginx.sock;
        location / { proxy_pass http://waf; proxy_http_version 1.1; proxy_set_header Connection ""; proxy_set_header Cookie "aws-waf-token=$token"; }
    }
}
CONF
# count NAME SOCKET COMMAND...: the instructions per request of COMMAND serving SOCKET.
count() {
    local name=$1 socket=$2
    shift 2
    valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$counted/$name.out" "$@" >"$counted/$name.log" 2>&1 &
    local counted_pid=$!
    pids+=($counted_pid)
    wait_for "curl -sf --unix-socket $socket http://localhost/" 120
    h2load_run "$socket" 16 2000 / >/dev/null
    callgrind_control -i on "$counted_pid" >/dev/null 2>&1
    h2load_run "$socket" 16 "$requests" / >/dev/null
    callgrind_control -i off "$counted_pid" >/dev/null 2>&1
    # The dump asked for holds the count since the switch (the one at exit, none: it is off).
    callgrind_control -d "$counted_pid" >/dev/null 2>&1
    wait_for "ls $counted/$name.out.* >/dev/null 2>&1" 60
    sleep 0.5
    awk -v n="$requests" '/^totals:/ {t = $2} END {printf "%.0f", t / n}' $(ls "$counted/$name.out".* | head -1)
    kill "$counted_pid"
    wait "$counted_pid" 2>/dev/null || true
}
ours=$(count proxy "$counted/proxy.sock" "$counted/waf-tokend" --config /dev/null --application-integration-url "$url" --domain-name 127.0.0.1 \
    --socket-path "$counted/token.sock" --state-directory "$counted" --log-level warning --proxy-listen "$counted/proxy.sock" \
    --proxy-upstream "http://127.0.0.1:$port" --proxy-threads 1)
anchor=$(count nginx "$counted/nginx.sock" nginx -c "$counted/nginx.conf" -p "$counted")
sketch=$(count sketch "$counted/sketch.sock" "$counted/waf-relay-sketch" "$counted/sketch.sock" "$port" "$token")
echo
echo "user-space instructions per request (callgrind), one worker, 16 connections, $requests requests after a warm-up"
printf "waf-tokend %d, nginx %d, sketch %d: waf-tokend %.2fx nginx's (the rate follows CPU per request, of which this is the part that differs)\n" \
    "$ours" "$anchor" "$sketch" "$(awk -v a="$ours" -v b="$anchor" 'BEGIN {print a / b}')"
